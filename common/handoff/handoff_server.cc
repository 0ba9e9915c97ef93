// One thread per connection, bounded by max_sessions: a session's requests are serialised (the
// protocol has one outstanding request per client), its callbacks (the agent's NIC
// registration can take a while) hold up only that client, and every wait is a blocking
// receive with a deadline. Stop() wakes them all by shutting their sockets down.
//
// What one client can hold is bounded per session (regions, bytes, channels) and for the
// process (connections, mapped regions, and a reserve of descriptors no client may take), so
// that a client that loops on OPEN_CHANNEL or REGISTER is refused at its own limit while the
// others go on being served.
#include "common/handoff/handoff_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <list>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/handoff/descriptor_budget.h"
#include "common/handoff/session_table.h"

namespace gdr::handoff {
namespace {

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "socket path '%s' must be 1..%u bytes", path, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// A socket file at `path` that nobody listens on is stale and replaced; anything else stays.
absl::Status ClearStaleSocket(const std::string& path, const sockaddr_un& addr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; not replacing it"));
  }
  ScopedFd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (probe.valid() &&
      ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return absl::AlreadyExistsError(absl::StrCat("another server listens on ", path));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("unlink of the stale socket ", path));
  }
  return absl::OkStatus();
}

void SetSendTimeout(int fd, absl::Duration d) {
  const timeval tv = absl::ToTimeval(d);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Error ErrorOf(const absl::Status& s) {
  return Error{static_cast<uint32_t>(s.code()), std::string(s.message())};
}

// The regions all sessions may map at once, and how a refusal names that limit.
SessionLimits LimitsOf(const HandoffServerOptions& o) {
  SessionLimits l;
  l.regions_per_session = o.max_regions_per_session;
  l.bytes_per_session = o.max_bytes_per_session;
  l.names = o.names;
  if (o.max_regions != 0) {
    l.regions = o.max_regions;
    l.regions_name = absl::StrCat(o.max_regions);
    return l;
  }
  uint64_t map_count = 65530;  // the kernel's default
  if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "re")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1 && v > 0) map_count = v;
    std::fclose(f);
  }
  l.regions = map_count / 2;
  l.regions_name = absl::StrCat(l.regions, ", half of vm.max_map_count ", map_count,
                                ": raise the sysctl for more");
  return l;
}

std::string WhoOf(const HandoffServerOptions& o) {
  if (o.server_name.empty()) return "the server";
  return o.server_name.substr(0, o.server_name.find(' '));  // "gdragent 1.4.0" -> "gdragent"
}

// A channel's socket as the server made it. The descriptor belongs to whoever on_channel gave
// it to; (dev, ino) tell whether `fd` still is that socket or has been closed (and the number
// perhaps reused): a socket's inode number is not reused while the socket exists.
struct ChannelRef {
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
  bool Is(int fd_now) const {
    struct stat st {};
    return ::fstat(fd_now, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev &&
           st.st_ino == ino;
  }
  bool Live() const { return Is(fd); }
  // Shuts the socket down if the number is still it: its owner sees the end and closes it, and
  // so does the client. A duplicate taken first is checked, so a number reused meanwhile is
  // never touched.
  void ShutDown() const {
    ScopedFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (dup.valid() && Is(dup.get())) ::shutdown(dup.get(), SHUT_RDWR);
  }
};

}  // namespace

class HandoffServer::Impl {
 public:
  explicit Impl(HandoffServerOptions o)
      : opt_(std::move(o)),
        table_(LimitsOf(opt_)),
        budget_(opt_.fd_reserve, opt_.names.fd_reserve, WhoOf(opt_)) {}
  ~Impl() { Stop(); }

  absl::Status Listen();
  void Stop();
  const SessionTable& table() const { return table_; }
  const std::string& path() const { return opt_.socket_path; }
  uint64_t refused() const { return refused_.load(); }

 private:
  struct Conn {
    ScopedFd fd;  // closed when the Conn is reaped, so Stop never shuts down a reused number
    std::thread thread;
    std::atomic<bool> done{false};
  };
  // A session as its connection's thread holds it.
  struct Session {
    SessionInfo info;
    std::vector<ChannelRef> channels;  // those not yet seen closed
    std::vector<StagedChunk> staged;   // REGISTER_CHUNKs for the next REGISTER, in order
  };
  void AcceptLoop();
  void Reap();
  void Serve(Conn* c);
  // Reads HELLO (within hello_timeout), admits the peer and opens its session; nullopt after
  // answering whatever went wrong.
  std::optional<SessionInfo> OpenSession(int fd);
  void ServeSession(int fd, Session* session);
  // Sends `body` as the reply to `id`; errors are counted as refusals. False when the peer is
  // gone or does not read.
  // `pass_fd` >= 0 rides along (CHANNEL_OPEN's socket).
  bool Reply(int fd, uint32_t id, Body body, int pass_fd = -1);
  bool ReplyError(int fd, uint32_t id, const absl::Status& s) { return Reply(fd, id, ErrorOf(s)); }
  // The reply to `m`; `*send` is a descriptor it carries (CHANNEL_OPEN).
  absl::StatusOr<Body> Handle(Session* session, Message m, std::vector<ScopedFd> fds,
                              ScopedFd* send);
  absl::StatusOr<Body> HandleRegister(Session* session, const Register& r, ScopedFd fd);
  absl::StatusOr<Body> HandleRegisterChunk(Session* session, const RegisterChunk& c, ScopedFd fd);
  absl::StatusOr<Body> HandleOpenChannel(Session* session, ScopedFd* send);
  // The session's channel limit now (the configured one, or derived from RLIMIT_NOFILE) and
  // how a refusal names it.
  std::pair<uint64_t, std::string> ChannelLimit() const;
  // The refusal of a connection, sent without a thread and without waiting on the peer.
  void RefuseConnection(int fd, const absl::Status& why);

  const HandoffServerOptions opt_;
  SessionTable table_;
  const DescriptorBudget budget_;
  ScopedFd listen_;
  ScopedFd wake_read_, wake_write_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> refused_{0};
  absl::Mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
  uint32_t live_ ABSL_GUARDED_BY(mu_) = 0;  // connections whose thread still runs
};

absl::Status HandoffServer::Impl::Listen() {
  if (opt_.max_sessions == 0) {
    return absl::InvalidArgumentError(absl::StrCat(opt_.names.max_sessions, " must be > 0"));
  }
  if (absl::Status s = budget_.Validate(); !s.ok()) return s;
  if (opt_.hello_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("hello_timeout must be > 0");
  }
  absl::StatusOr<sockaddr_un> addr = UnixAddress(opt_.socket_path);
  if (!addr.ok()) return addr.status();
  if (absl::Status s = ClearStaleSocket(opt_.socket_path, *addr); !s.ok()) return s;
  listen_ = ScopedFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_.valid()) return absl::ErrnoToStatus(errno, "socket(AF_UNIX, SOCK_SEQPACKET)");
  if (::bind(listen_.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind to ", opt_.socket_path));
  }
  struct stat st {};
  if (::chmod(opt_.socket_path.c_str(), opt_.socket_mode) != 0 ||
      ::stat(opt_.socket_path.c_str(), &st) != 0) {
    const int e = errno;
    ::unlink(opt_.socket_path.c_str());
    return absl::ErrnoToStatus(e, absl::StrCat("chmod of ", opt_.socket_path));
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  if (::listen(listen_.get(), SOMAXCONN) != 0) {
    const int e = errno;
    ::unlink(opt_.socket_path.c_str());
    return absl::ErrnoToStatus(e, absl::StrCat("listen on ", opt_.socket_path));
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    ::unlink(opt_.socket_path.c_str());
    return absl::ErrnoToStatus(e, "pipe2");
  }
  wake_read_ = ScopedFd(p[0]);
  wake_write_ = ScopedFd(p[1]);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void HandoffServer::Impl::Stop() {
  if (stopped_.exchange(true)) return;
  if (acceptor_.joinable()) {
    const char b = 1;
    (void)!::write(wake_write_.get(), &b, 1);
    acceptor_.join();
  }
  std::list<std::unique_ptr<Conn>> conns;
  {
    absl::MutexLock lock(&mu_);
    for (auto& c : conns_) ::shutdown(c->fd.get(), SHUT_RDWR);
    conns.swap(conns_);
  }
  for (auto& c : conns) c->thread.join();
  conns.clear();
  // Remove the socket only if it is still ours (a successor may have replaced it).
  struct stat st {};
  if (listen_.valid() && ::lstat(opt_.socket_path.c_str(), &st) == 0 && st.st_dev == dev_ &&
      st.st_ino == ino_) {
    ::unlink(opt_.socket_path.c_str());
  }
  listen_.Reset();
}

void HandoffServer::Impl::Reap() {
  std::list<std::unique_ptr<Conn>> done;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      auto next = std::next(it);
      if ((*it)->done.load()) done.splice(done.end(), conns_, it);
      it = next;
    }
  }
  for (auto& c : done) c->thread.join();
}

void HandoffServer::Impl::AcceptLoop() {
  pollfd p[2] = {{listen_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
  for (;;) {
    const int r = ::poll(p, 2, 1000);
    if (p[1].revents != 0) return;
    Reap();
    if (r <= 0 || (p[0].revents & POLLIN) == 0) continue;
    ScopedFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
        GDR_LOG(kWarning) << "handoff: accept on " << opt_.socket_path << ": " << strerror(errno);
        ::poll(&p[1], 1, 100);  // let descriptors free up instead of spinning
      }
      continue;
    }
    // The descriptors first: the accepted one is among those open now.
    if (absl::Status s = budget_.Check(0, "a new connection"); !s.ok()) {
      GDR_LOG_EVERY_N_SEC(kWarning, 10) << "handoff: " << s.message();
      RefuseConnection(fd.get(), s);
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (live_ >= opt_.max_sessions) {
      RefuseConnection(fd.get(), absl::ResourceExhaustedError(absl::StrFormat(
                                     "%s has %u connections, its limit (%s=%u)", WhoOf(opt_),
                                     live_, opt_.names.max_sessions, opt_.max_sessions)));
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = std::move(fd);
    Conn* c = conn.get();
    try {
      c->thread = std::thread([this, c] { Serve(c); });
    } catch (const std::system_error& e) {
      GDR_LOG(kWarning) << "handoff: no thread for a connection: " << e.what();
      refused_.fetch_add(1);
      continue;
    }
    ++live_;
    conns_.push_back(std::move(conn));
  }
}

void HandoffServer::Impl::RefuseConnection(int fd, const absl::Status& why) {
  refused_.fetch_add(1);
  const std::string reply = Encode(Message{0, ErrorOf(why)});
  (void)!::send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

bool HandoffServer::Impl::Reply(int fd, uint32_t id, Body body, int pass_fd) {
  if (std::holds_alternative<Error>(body)) refused_.fetch_add(1);
  std::vector<int> fds;
  if (pass_fd >= 0) fds.push_back(pass_fd);
  return SendWithFds(fd, Encode(Message{id, std::move(body)}), fds).ok();
}

void HandoffServer::Impl::Serve(Conn* c) {
  const int fd = c->fd.get();
  SetSendTimeout(fd, opt_.hello_timeout);  // a peer that does not read holds no thread for ever
  if (std::optional<SessionInfo> info = OpenSession(fd)) {
    Session session{*std::move(info), {}, {}};
    ServeSession(fd, &session);
    const size_t regions = table_.Close(session.info.id);
    // A channel lives no longer than its session: ops on it would find no regions, and a
    // client that reconnects must not keep the descriptors of its earlier sessions.
    for (const ChannelRef& c : session.channels) c.ShutDown();
    GDR_LOG(kDebug) << "handoff: session " << absl::StrFormat("%016x", session.info.id)
                    << " ended; its " << regions << " regions left the table";
    if (opt_.on_session_end) opt_.on_session_end(session.info);
  }
  ::shutdown(fd, SHUT_RDWR);  // the peer sees the end now; the number is freed at reaping
  absl::MutexLock lock(&mu_);
  --live_;
  c->done.store(true);
}

std::optional<SessionInfo> HandoffServer::Impl::OpenSession(int fd) {
  absl::StatusOr<PeerCredentials> peer = PeerCredentialsOf(fd);
  if (!peer.ok()) return std::nullopt;
  absl::StatusOr<ReceivedMessage> in =
      ReceiveWithFds(fd, kMaxMessageBytes, kMaxFds, absl::Now() + opt_.hello_timeout);
  if (!in.ok()) {
    ReplyError(fd, 0, absl::IsDeadlineExceeded(in.status())
                          ? absl::DeadlineExceededError(absl::StrCat(
                                "no HELLO within ", absl::FormatDuration(opt_.hello_timeout)))
                          : in.status());
    return std::nullopt;
  }
  if (in->eof) return std::nullopt;
  const uint32_t id = RequestIdOf(in->bytes).value_or(0);
  absl::StatusOr<Message> m = Decode(in->bytes, in->fds.size());
  if (!m.ok()) {
    ReplyError(fd, id, m.status());
    return std::nullopt;
  }
  const auto* hello = std::get_if<Hello>(&m->body);
  if (hello == nullptr) {
    ReplyError(fd, id,
               absl::FailedPreconditionError(absl::StrCat(
                   "the first message must be HELLO, not ", MessageTypeName(TypeOf(m->body)))));
    return std::nullopt;
  }
  if (absl::Status s = opt_.admit ? opt_.admit(*peer) : absl::OkStatus(); !s.ok()) {
    std::string message(s.message());
    if (!absl::StrContains(message, absl::StrCat(peer->uid))) {
      absl::StrAppendFormat(&message, " (peer uid %u, gid %u, pid %d)", peer->uid, peer->gid,
                            peer->pid);
    }
    ReplyError(fd, id, absl::Status(s.code(), message));
    return std::nullopt;
  }
  HelloOk ok;
  ok.server = opt_.server_name;
  absl::StatusOr<SessionInfo> info = table_.Open(*peer, hello->name, &ok.key);
  if (!info.ok()) {
    ReplyError(fd, id, info.status());
    return std::nullopt;
  }
  ok.session = info->id;
  if (!Reply(fd, id, std::move(ok))) {
    table_.Close(info->id);
    return std::nullopt;
  }
  return *info;
}

void HandoffServer::Impl::ServeSession(int fd, Session* session) {
  const SessionInfo& info = session->info;
  GDR_LOG(kDebug) << "handoff: session " << absl::StrFormat("%016x", info.id) << " opened by pid "
                  << info.peer.pid << " uid " << info.peer.uid << " ("
                  << absl::CHexEscape(info.name) << ")";
  for (;;) {
    absl::StatusOr<ReceivedMessage> in =
        ReceiveWithFds(fd, kMaxMessageBytes, kMaxFds, absl::InfiniteFuture());
    if (!in.ok()) {
      // Too long, or too many descriptors: nothing to answer to; end the conversation.
      if (absl::IsInvalidArgument(in.status())) ReplyError(fd, 0, in.status());
      return;
    }
    if (in->eof) return;
    if (in->fds_lost) {
      // The kernel could not give this process the descriptor the request carried (EMFILE):
      // the request is refused and the session goes on.
      const absl::Status s = absl::ResourceExhaustedError(absl::StrFormat(
          "the descriptor the request carried could not be received: %s is out of descriptors "
          "(RLIMIT_NOFILE %u); try again once others close",
          WhoOf(opt_), DescriptorBudget::Limit()));
      if (!ReplyError(fd, RequestIdOf(in->bytes).value_or(0), s)) return;
      continue;
    }
    absl::StatusOr<Message> m = Decode(in->bytes, in->fds.size());
    if (!m.ok()) {
      std::optional<uint32_t> id = RequestIdOf(in->bytes);
      if (!id) {
        // Not this protocol at all: answer once, then close only this connection.
        ReplyError(fd, 0, absl::InvalidArgumentError(absl::StrCat(
                              m.status().message(), "; closing the connection")));
        return;
      }
      if (!ReplyError(fd, *id, m.status())) return;
      continue;
    }
    const uint32_t id = m->request_id;
    ScopedFd send;
    absl::StatusOr<Body> reply = Handle(session, *std::move(m), std::move(in->fds), &send);
    if (!(reply.ok() ? Reply(fd, id, *std::move(reply), send.get())
                     : ReplyError(fd, id, reply.status()))) {
      return;
    }
  }
}

absl::StatusOr<Body> HandoffServer::Impl::Handle(Session* session, Message m,
                                                 std::vector<ScopedFd> fds, ScopedFd* send) {
  const SessionInfo& info = session->info;
  ScopedFd fd = fds.empty() ? ScopedFd() : std::move(fds[0]);
  if (const auto* r = std::get_if<Register>(&m.body)) {
    return HandleRegister(session, *r, std::move(fd));
  }
  if (const auto* c = std::get_if<RegisterChunk>(&m.body)) {
    return HandleRegisterChunk(session, *c, std::move(fd));
  }
  if (const auto* d = std::get_if<Deregister>(&m.body)) {
    if (absl::Status s = table_.Remove(info.id, d->rkey); !s.ok()) return s;
    return Deregistered{};
  }
  if (std::holds_alternative<OpenChannel>(m.body)) return HandleOpenChannel(session, send);
  const char* type = MessageTypeName(TypeOf(m.body));
  if (std::holds_alternative<Hello>(m.body)) {
    return absl::FailedPreconditionError("HELLO again: this connection has its session");
  }
  return absl::InvalidArgumentError(
      absl::StrCat(type, " is a server's reply, not a request a client sends"));
}

absl::StatusOr<Body> HandoffServer::Impl::HandleRegisterChunk(Session* session,
                                                              const RegisterChunk& c,
                                                              ScopedFd fd) {
  std::vector<StagedChunk>& staged = session->staged;
  if (staged.size() >= kMaxChunks) {
    // The client is out of step (or hostile): what it staged is dropped with this refusal.
    staged.clear();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "REGISTER_CHUNK refused: a region is staged from at most %u chunks; the %u staged are "
        "dropped",
        kMaxChunks, kMaxChunks));
  }
  // The chunk's descriptor is held until the REGISTER that maps it: it must leave the reserve.
  if (absl::Status s = budget_.Check(0, "REGISTER_CHUNK"); !s.ok()) {
    staged.clear();
    return absl::Status(s.code(), absl::StrCat(s.message(), " (the chunks staged are dropped)"));
  }
  staged.push_back(StagedChunk{std::move(fd), c.size});
  return ChunkStaged{static_cast<uint32_t>(staged.size())};
}

absl::StatusOr<Body> HandoffServer::Impl::HandleRegister(Session* session, const Register& r,
                                                         ScopedFd fd) {
  const SessionInfo& info = session->info;
  std::vector<StagedChunk> chunks = std::move(session->staged);
  session->staged.clear();
  if (r.kind != MemoryKind::kGpuVmmChunks && !chunks.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "REGISTER of %s memory while %u REGISTER_CHUNKs are staged (they are for a REGISTER of "
        "gpu-vmm-chunks); the chunks are dropped",
        MemoryKindName(r.kind), chunks.size()));
  }
  absl::StatusOr<uint32_t> rkey = table_.Reserve(info.id, r.size);
  if (!rkey.ok()) return rkey.status();
  absl::StatusOr<std::shared_ptr<ImportedRegion>> region =
      ImportedRegion::Import(r, std::move(fd), *rkey, std::move(chunks));
  if (!region.ok()) return region.status();
  if (opt_.on_register) {
    if (absl::Status s = opt_.on_register(info, *region); !s.ok()) return s;
  }
  // on_register has handed the memory on if it needed to; the mapping keeps it from here, and
  // a descriptor kept per region would let one client run the process out of them.
  (*region)->ReleaseDescriptor();
  if (absl::Status s = table_.Add(info.id, *region); !s.ok()) return s;
  return Registered{*rkey};
}

std::pair<uint64_t, std::string> HandoffServer::Impl::ChannelLimit() const {
  const std::string& flag = opt_.names.max_channels_per_session;
  if (opt_.max_channels_per_session != 0) {
    return {opt_.max_channels_per_session,
            absl::StrCat(flag, "=", opt_.max_channels_per_session)};
  }
  const uint64_t limit = std::clamp<uint64_t>(budget_.Usable() / 16, 1, 64);
  return {limit, absl::StrFormat("%s, %u here: by default a 16th of the %u descriptors above %s",
                                 flag, limit, budget_.Usable(), opt_.names.fd_reserve)};
}

absl::StatusOr<Body> HandoffServer::Impl::HandleOpenChannel(Session* session, ScopedFd* send) {
  if (!opt_.on_channel) {
    return absl::UnimplementedError("this server takes ops over gRPC, not a channel");
  }
  std::vector<ChannelRef>& channels = session->channels;
  channels.erase(std::remove_if(channels.begin(), channels.end(),
                                [](const ChannelRef& c) { return !c.Live(); }),
                 channels.end());
  if (const auto [limit, name] = ChannelLimit(); channels.size() >= limit) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "OPEN_CHANNEL refused: the session has %u channels open, its limit (%s); close one "
        "first",
        channels.size(), name));
  }
  // Both ends for a moment; the client's leaves with the reply.
  if (absl::Status s = budget_.Check(2, "OPEN_CHANNEL"); !s.ok()) return s;
  // The pair is made here: the server's end is an open file of its own, whose flags no client
  // can change under the server's poller.
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("OPEN_CHANNEL: socketpair: ", strerror(errno)));
  }
  ScopedFd ours(pair[0]);
  ScopedFd theirs(pair[1]);
  struct stat st {};
  if (::fstat(ours.get(), &st) != 0) return absl::ErrnoToStatus(errno, "OPEN_CHANNEL: fstat");
  const ChannelRef ref{ours.get(), st.st_dev, st.st_ino};
  if (absl::Status s = opt_.on_channel(session->info, std::move(ours)); !s.ok()) return s;
  channels.push_back(ref);
  *send = std::move(theirs);
  return ChannelOpen{};
}

HandoffLimitNames HandoffLimitNames::Flags(absl::string_view prefix) {
  auto flag = [prefix](absl::string_view name) { return absl::StrCat("--", prefix, name); };
  return {flag("max-clients"), flag("max-regions-per-client"), flag("max-bytes-per-client"),
          flag("max-channels-per-client"), flag("fd-reserve")};
}

absl::StatusOr<std::unique_ptr<HandoffServer>> HandoffServer::Start(HandoffServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  return std::unique_ptr<HandoffServer>(new HandoffServer(std::move(impl)));
}

HandoffServer::HandoffServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HandoffServer::~HandoffServer() { Stop(); }

absl::StatusOr<std::shared_ptr<const ImportedRegion>> HandoffServer::Resolve(
    uint64_t session, absl::string_view key, uint32_t rkey, uint64_t address, uint64_t length,
    bool need_write) const {
  return impl_->table().Resolve(session, key, rkey, address, length, need_write);
}

absl::StatusOr<SessionInfo> HandoffServer::Session(uint64_t session) const {
  return impl_->table().Session(session);
}

void HandoffServer::Stop() { impl_->Stop(); }

HandoffStats HandoffServer::stats() const {
  HandoffStats s = impl_->table().stats();
  s.refused = impl_->refused();
  return s;
}

const std::string& HandoffServer::socket_path() const { return impl_->path(); }

}  // namespace gdr::handoff
