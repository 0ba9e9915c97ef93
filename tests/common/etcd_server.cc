#include "tests/common/etcd_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace gdr::integ {

absl::StatusOr<BoundPort> BoundPort::Reserve() {
  BoundPort out;
  out.fd_ = ScopedFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!out.fd_.valid()) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(out.fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, "bind 127.0.0.1:0");
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(out.fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockname");
  }
  out.port_ = ntohs(addr.sin_port);
  return out;
}

absl::Status BoundPort::Listen() {
  if (::listen(fd_.get(), 16) != 0) return absl::ErrnoToStatus(errno, "listen");
  return absl::OkStatus();
}

std::string BoundPort::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::Status EtcdServer::Available() {
  if (::access(kBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no etcd at ", kBinary, " (install the Debian package etcd-server)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Create(absl::Duration ready_timeout,
                                                               std::optional<EtcdTls> tls) {
  if (absl::Status s = Available(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create("gdr-etcd");
  if (!dir.ok()) return dir.status();
  // Both held at once so they differ, then released for etcd to bind.
  absl::StatusOr<BoundPort> client = BoundPort::Reserve();
  if (!client.ok()) return client.status();
  absl::StatusOr<BoundPort> peer = BoundPort::Reserve();
  if (!peer.ok()) return peer.status();
  client->Release();
  peer->Release();
  std::unique_ptr<EtcdServer> server(
      new EtcdServer(*std::move(dir), client->port(), peer->port(), ready_timeout, std::move(tls)));
  if (absl::Status s = server->Start(); !s.ok()) return s;
  return server;
}

EtcdServer::~EtcdServer() {
  if (Running()) (void)Kill();
  if (::testing::Test::HasFailure()) {
    std::cerr << "---- etcd log (" << dir_->path() << ") ----\n" << Log() << "---- end ----\n";
  }
}

absl::Status EtcdServer::Start() {
  if (Running()) return absl::FailedPreconditionError("etcd is already running");
  ++runs_;
  const std::string client_url =
      absl::StrCat(tls_ ? "https" : "http", "://127.0.0.1:", client_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port_);
  const std::string name = "gdr-test";
  // A data dir that already holds the member makes etcd ignore the --initial-* flags: a
  // restart comes back as the same member with the same keys, leases and revisions.
  // clang-format off: flag and value pairs
  std::vector<std::string> argv = {
      kBinary,
      "--name", name,
      "--data-dir", dir_->File("data"),
      "--listen-client-urls", client_url,
      "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url,
      "--initial-advertise-peer-urls", peer_url,
      "--initial-cluster", absl::StrCat(name, "=", peer_url),
      "--initial-cluster-state", "new",
      "--initial-cluster-token", dir_->path(),
      "--logger", "zap",
      "--log-outputs", "stderr"};
  // clang-format on
  if (tls_) {
    argv.insert(argv.end(), {"--cert-file=" + tls_->server.cert, "--key-file=" + tls_->server.key,
                             "--trusted-ca-file=" + tls_->trusted_ca, "--client-cert-auth"});
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(argv, dir_->File(absl::StrCat("etcd-", runs_, ".out")),
                          dir_->File(absl::StrCat("etcd-", runs_, ".log")));
  if (!child.ok()) return child.status();
  child_ = *std::move(child);
  return WaitReady();
}

absl::Status EtcdServer::WaitReady() {
  grpc::ChannelArguments args;
  // Retry the connection often while etcd comes up (gRPC's default backoff reaches 2 minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls_) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileOrEmpty(tls_->server_ca);
    ssl.pem_cert_chain = ReadFileOrEmpty(tls_->client.cert);
    ssl.pem_private_key = ReadFileOrEmpty(tls_->client.key);
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(endpoint(), credentials, args);
  auto kv = etcdserverpb::KV::NewStub(channel);
  grpc::Status last;
  bool exited = false;
  const bool ready = PollUntil(
      [&] {
        if (!child_->Running()) {
          exited = true;
          return true;
        }
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
        // Waiting, the call polls the channel, so its connection attempts make progress.
        context.set_wait_for_ready(true);
        etcdserverpb::RangeRequest request;
        request.set_key("gdr-test-ready");
        etcdserverpb::RangeResponse response;
        last = kv->Range(&context, request, &response);
        return last.ok();
      },
      ready_timeout_, absl::Milliseconds(50));
  if (exited) {
    return absl::InternalError(absl::StrCat("etcd ", DescribeWaitStatus(child_->wait_status()),
                                            " before answering; its log:\n", Log()));
  }
  if (!ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("etcd on ", endpoint(), " did not answer a Range within ",
                     absl::FormatDuration(ready_timeout_), " (last: ", last.error_message(),
                     "); its log:\n", Log()));
  }
  return absl::OkStatus();
}

absl::Status EtcdServer::End(int signal, absl::Duration grace) {
  if (!Running()) return absl::FailedPreconditionError("etcd is not running");
  if (absl::Status s = child_->Signal(signal); !s.ok()) return s;
  if (child_->Wait(grace).ok()) return absl::OkStatus();
  if (absl::Status s = child_->Signal(SIGKILL); !s.ok()) return s;
  absl::StatusOr<int> st = child_->Wait(absl::Seconds(10));
  return st.ok() ? absl::OkStatus() : st.status();
}

absl::Status EtcdServer::Stop() { return End(SIGTERM, absl::Seconds(10)); }

absl::Status EtcdServer::Kill() { return End(SIGKILL, absl::Seconds(10)); }

std::string EtcdServer::endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

std::string EtcdServer::url(absl::string_view prefix) const {
  return absl::StrCat("etcd://", endpoint(), "/", absl::StripPrefix(prefix, "/"));
}

std::string EtcdServer::Log() const {
  std::string out;
  for (int run = 1; run <= runs_; ++run) {
    absl::StrAppend(&out, "[run ", run, "]\n",
                    ReadFileOrEmpty(dir_->File(absl::StrCat("etcd-", run, ".log"))));
  }
  return out;
}

}  // namespace gdr::integ
