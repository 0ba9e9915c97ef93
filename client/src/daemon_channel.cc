// The channel to the daemon (retries off, TLS when asked, the bearer token on every call, the
// hint that a plaintext client probably meets a TLS daemon) and the status conversion callers
// of the public API use.
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cerrno>
#include <iterator>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_lifetime.h"
#include "common/grpc/grpc_peer.h"
#include "common/grpc/grpc_status.h"
#include "common/base/socket.h"
#include "common/grpc/tls_material.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"

namespace gdr {
namespace {

// Adds `authorization: Bearer <token>` to the initial metadata of every call of a channel.
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;  // owned by the factory, which the channel keeps
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : value_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new BearerToken(&value_);
  }

 private:
  const std::string value_;
};

// A TLS 1.2 ClientHello offering the ECDHE AES-GCM / ChaCha20 suites, curves and signature
// schemes TLS servers take, and ALPN h2: any TLS server answers it with a TLS record (a
// ServerHello, or an alert when it wants something else), which is all the probe looks at.
std::string ClientHello() {
  auto u16 = [](std::string& s, size_t v) {
    s.push_back(static_cast<char>((v >> 8) & 0xff));
    s.push_back(static_cast<char>(v & 0xff));
  };
  std::string ext;
  auto add_ext = [&](uint16_t type, const std::string& body) {
    u16(ext, type);
    u16(ext, body.size());
    ext += body;
  };
  std::string groups;
  u16(groups, 4);
  for (uint16_t g : {0x001d, 0x0017}) u16(groups, g);  // x25519, secp256r1
  add_ext(0x000a, groups);
  add_ext(0x000b, std::string("\x01\x00", 2));  // ec_point_formats: uncompressed
  std::string sigs;
  const uint16_t schemes[] = {0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601};
  u16(sigs, 2 * std::size(schemes));
  for (uint16_t a : schemes) u16(sigs, a);
  add_ext(0x000d, sigs);
  add_ext(0x0010, std::string("\x00\x03\x02h2", 5));  // ALPN: h2
  std::string body;
  u16(body, 0x0303);        // TLS 1.2
  body.append(32, '\x5a');  // client random: nothing is derived from it
  body.push_back(0);        // no session id
  const uint16_t suites[] = {0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8};
  u16(body, 2 * std::size(suites));
  for (uint16_t c : suites) u16(body, c);
  body.append("\x01\x00", 2);  // compression: null only
  u16(body, ext.size());
  body += ext;
  std::string hello = {'\x01', '\x00'};  // ClientHello, 24-bit length
  u16(hello, body.size());
  hello += body;
  std::string record = {'\x16'};  // handshake record
  u16(record, 0x0301);
  u16(record, hello.size());
  return record + hello;
}

// A connection to the channel's target as gRPC names it (ParseGrpcTarget): HOST:PORT (dns:///,
// ipv4: and ipv6: prefixes too) or unix:PATH. INVALID_ARGUMENT for other forms, which are then
// not probed.
absl::StatusOr<gdr::ScopedFd> ConnectTarget(absl::string_view target, absl::Duration timeout) {
  absl::StatusOr<gdr::GrpcTarget> t = gdr::ParseGrpcTarget(target);
  if (!t.ok()) return t.status();
  if (!t->unix_path.empty()) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (t->unix_path.size() >= sizeof(sun.sun_path)) {
      return absl::InvalidArgumentError("unix socket path");
    }
    t->unix_path.copy(sun.sun_path, t->unix_path.size());
    gdr::ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return absl::ErrnoToStatus(errno, "socket");
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sun), sizeof(sun)) != 0) {
      return absl::ErrnoToStatus(errno, "connect");
    }
    return fd;
  }
  return gdr::ConnectTcp(t->host_port.host, t->host_port.port, timeout);
}

// Whether the server at `target` answers a TLS ClientHello with a TLS record (content type
// handshake or alert, version 3.x). A plaintext gRPC server answers with HTTP/2 (its SETTINGS
// frame opens with a zero byte) or closes; a dead or dying one refuses or resets: all "no",
// as is silence until `timeout`.
bool SpeaksTls(const std::string& target, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<gdr::ScopedFd> fd = ConnectTarget(target, timeout);
  if (!fd.ok()) return false;
  static const std::string* const hello = new std::string(ClientHello());
  if (!gdr::WriteFull(fd->get(), hello->data(), hello->size()).ok()) return false;
  unsigned char head[2];
  if (!gdr::ReadFullBefore(fd->get(), head, sizeof(head), deadline).ok()) return false;
  return (head[0] == 0x16 || head[0] == 0x15) && head[1] == 0x03;
}

// What one plaintext channel knows for its hint, shared by its calls' interceptors.
struct HintState {
  explicit HintState(std::string t) : target(std::move(t)) {}
  const std::string target;
  // A call of this channel has been answered by the daemon: it speaks plaintext (or did), so a
  // connection that breaks later is a daemon that died or restarted, never a TLS refusal.
  std::atomic<bool> reached{false};
};

// How long the probe may take: a TLS server answers a ClientHello within a round trip; this
// bounds what a peer that accepts and says nothing can add to a call that already failed.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

// On a plaintext channel, a TLS daemon drops the connection during what gRPC takes for the HTTP/2
// preface, which gRPC reports as UNAVAILABLE with a bare socket error. This adds what the caller
// most likely has to do about it, when it is likely: the channel has never reached the daemon,
// the failure is one while connecting, and the server there answers a ClientHello in TLS.
// Without the probe, a daemon SIGKILLed while a connection to it was being set up (the kernel
// resets what its listening socket had queued) got the hint too.
class PlaintextHint final : public grpc::experimental::Interceptor {
 public:
  explicit PlaintextHint(std::shared_ptr<HintState> state) : state_(std::move(state)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_STATUS)) {
      grpc::Status* s = methods->GetRecvStatus();
      if (s != nullptr && AnsweredByServer(s->error_code())) {
        state_->reached.store(true, std::memory_order_relaxed);
      } else if (s != nullptr && s->error_code() == grpc::StatusCode::UNAVAILABLE &&
                 !state_->reached.load(std::memory_order_relaxed) &&
                 LooksLikeTlsRefusal(s->error_message()) &&
                 SpeaksTls(state_->target, kProbeTimeout)) {
        *s = grpc::Status(s->error_code(),
                          absl::StrCat(s->error_message(),
                                       " (the daemon probably requires TLS: give the client its "
                                       "CA, gdrctl --tls-ca FILE / ClientOptions::tls_ca)"),
                          s->error_details());
      }
    }
    methods->Proceed();
  }

 private:
  // Codes that only come from a server that took the call (the others can be the client's own:
  // a connection that failed, a deadline, a cancel, a message too large to send).
  static bool AnsweredByServer(grpc::StatusCode code) {
    switch (code) {
      case grpc::StatusCode::OK:
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::NOT_FOUND:
      case grpc::StatusCode::ALREADY_EXISTS:
      case grpc::StatusCode::PERMISSION_DENIED:
      case grpc::StatusCode::FAILED_PRECONDITION:
      case grpc::StatusCode::ABORTED:
      case grpc::StatusCode::OUT_OF_RANGE:
      case grpc::StatusCode::UNIMPLEMENTED:
      case grpc::StatusCode::DATA_LOSS:
      case grpc::StatusCode::UNAUTHENTICATED:
        return true;
      case grpc::StatusCode::CANCELLED:
      case grpc::StatusCode::UNKNOWN:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
      case grpc::StatusCode::INTERNAL:
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DO_NOT_USE:
        return false;
    }
    return false;
  }

  // Only while connecting: a connection that breaks later (a daemon that died) says the same socket
  // words without "failed to connect".
  static bool LooksLikeTlsRefusal(const std::string& m) {
    return absl::StrContains(m, "failed to connect") &&
           (absl::StrContains(m, "Socket closed") || absl::StrContains(m, "Connection reset") ||
            absl::StrContains(m, "connection closed") || absl::StrContains(m, "End of TCP stream"));
  }

  const std::shared_ptr<HintState> state_;
};

class PlaintextHintFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit PlaintextHintFactory(std::string target)
      : state_(std::make_shared<HintState>(std::move(target))) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new PlaintextHint(state_);
  }

 private:
  const std::shared_ptr<HintState> state_;
};

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const gdrstore::ClientOptions& o) {
  if (o.tls_ca.empty() && o.tls_cert.empty()) {
    if (!o.tls_key.empty()) {
      return absl::InvalidArgumentError("tls_key (--tls-key) needs tls_cert (--tls-cert)");
    }
    return grpc::InsecureChannelCredentials();
  }
  absl::StatusOr<TlsMaterial> m =
      TlsMaterial::Load({o.tls_cert, o.tls_key, o.tls_ca}, "tls_cert (--tls-cert)",
                        "tls_key (--tls-key)", "tls_ca (--tls-ca)");
  if (!m.ok()) return m.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = m->ca_pem;  // empty: gRPC's default roots
  ssl.pem_private_key = m->key_pem;
  ssl.pem_cert_chain = m->cert_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace
}  // namespace gdr

namespace gdrstore {

absl::Status FromGrpcStatus(const grpc::Status& status) { return gdr::FromGrpcStatus(status); }

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenDaemonChannel(const ClientOptions& options) {
  gdr::KeepGrpcCallbackQueue();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = gdr::Credentials(options);
  if (!creds.ok()) return creds.status();
  const bool tls = !options.tls_ca.empty() || !options.tls_cert.empty();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Each Client is one connection of its own: channels of one process to one daemon would
  // otherwise share gRPC's global subchannel pool, and the daemon (its per-client figures,
  // its trace) could not tell the Clients apart.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (tls && !options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
  if (!tls) {
    chain.push_back(std::make_unique<gdr::PlaintextHintFactory>(options.daemon_address));
  }
  if (!options.token.empty()) {
    chain.push_back(std::make_unique<gdr::BearerTokenFactory>(options.token));
  }
  if (chain.empty()) return grpc::CreateCustomChannel(options.daemon_address, *creds, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(options.daemon_address, *creds,
                                                                 args, std::move(chain));
}

}  // namespace gdrstore
