#include "daemon/service/token_auth.h"

#include "absl/strings/match.h"
#include "common/log.h"
#include "common/token_file.h"

namespace gdr {

void TokenAuth::Set(std::vector<std::string> tokens) {
  auto next = std::make_shared<const std::vector<std::string>>(std::move(tokens));
  absl::MutexLock lock(&mu_);
  enabled_.store(!next->empty(), std::memory_order_release);
  tokens_ = std::move(next);
}

std::string TokenAuth::AnyToken() const {
  absl::MutexLock lock(&mu_);
  return tokens_ && !tokens_->empty() ? tokens_->front() : std::string();
}

absl::Status TokenAuth::CheckValue(const std::vector<std::string>& accepted,
                                   const std::string* authorization) {
  constexpr absl::string_view kScheme = "Bearer ";
  if (authorization == nullptr || !absl::StartsWithIgnoreCase(*authorization, kScheme)) {
    return absl::UnauthenticatedError(
        "this daemon requires a token: send metadata 'authorization: Bearer <token>' "
        "(gdrctl --token-file, ClientOptions::token)");
  }
  const absl::string_view presented = absl::string_view(*authorization).substr(kScheme.size());
  bool match = false;
  for (const std::string& t : accepted) match |= TokenEquals(presented, t);  // no early exit
  if (!match) return absl::PermissionDeniedError("the token presented is not accepted by this daemon");
  return absl::OkStatus();
}

absl::Status TokenAuth::Check(const grpc::CallbackServerContext& ctx) const {
  if (!enabled()) return absl::OkStatus();
  std::shared_ptr<const std::vector<std::string>> accepted;
  {
    absl::MutexLock lock(&mu_);
    accepted = tokens_;
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  std::string value;
  if (it != md.end()) value.assign(it->second.data(), it->second.size());
  absl::Status s = CheckValue(*accepted, it != md.end() ? &value : nullptr);
  if (!s.ok()) {
    GDR_LOG_EVERY_N_SEC(kWarning, 5) << "refused a call from " << ctx.peer() << ": "
                                     << s.message();
  }
  return s;
}

}  // namespace gdr
