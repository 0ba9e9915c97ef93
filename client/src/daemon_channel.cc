// The channel to the daemon (retries off, the bearer token on every call) and the status
// conversion callers of the public API use.
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include "common/grpc_status.h"
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

}  // namespace
}  // namespace gdr

namespace gdrstore {

absl::Status FromGrpcStatus(const grpc::Status& status) { return gdr::FromGrpcStatus(status); }

std::shared_ptr<grpc::Channel> OpenDaemonChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  if (options.token.empty()) {
    return grpc::CreateCustomChannel(options.daemon_address, grpc::InsecureChannelCredentials(),
                                     args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
  chain.push_back(std::make_unique<gdr::BearerTokenFactory>(options.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.daemon_address, grpc::InsecureChannelCredentials(), args, std::move(chain));
}

}  // namespace gdrstore
