// The channel to the daemon (retries off, TLS when asked, the bearer token on every call) and the
// status conversion callers of the public API use.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/tls_material.h"
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

// On a plaintext channel, a TLS daemon drops the connection during what gRPC takes for the HTTP/2
// preface, which gRPC reports as UNAVAILABLE with a bare socket error. This adds what the caller
// most likely has to do about it.
class PlaintextHint final : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::POST_RECV_STATUS)) {
      grpc::Status* s = methods->GetRecvStatus();
      if (s != nullptr && s->error_code() == grpc::StatusCode::UNAVAILABLE &&
          LooksLikeTlsRefusal(s->error_message())) {
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
  // Only while connecting: a connection that breaks later (a daemon that died) says the same socket
  // words without "failed to connect".
  static bool LooksLikeTlsRefusal(const std::string& m) {
    return absl::StrContains(m, "failed to connect") &&
           (absl::StrContains(m, "Socket closed") || absl::StrContains(m, "Connection reset") ||
            absl::StrContains(m, "connection closed") || absl::StrContains(m, "End of TCP stream"));
  }
};

class PlaintextHintFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new PlaintextHint();
  }
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
  if (!tls) chain.push_back(std::make_unique<gdr::PlaintextHintFactory>());
  if (!options.token.empty()) {
    chain.push_back(std::make_unique<gdr::BearerTokenFactory>(options.token));
  }
  if (chain.empty()) return grpc::CreateCustomChannel(options.daemon_address, *creds, args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(options.daemon_address, *creds,
                                                                 args, std::move(chain));
}

}  // namespace gdrstore
