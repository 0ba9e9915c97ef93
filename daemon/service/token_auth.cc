#include "daemon/service/token_auth.h"

#include <sys/random.h>

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace gdr {
namespace {

constexpr absl::string_view kScheme = "Bearer ";

// 32 bytes of the kernel's randomness, hex: the token no file holds.
std::string RandomToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Without randomness no internal token can be trusted; the daemon cannot run safely.
      GDR_LOG(kError) << "getrandom failed (errno " << errno << "); aborting";
      std::abort();
    }
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

Credential InternalCredential(std::string token) {
  Credential c;
  c.kind = Credential::Kind::kToken;
  c.value = std::move(token);
  c.label = "gdrstored-internal";  // no volume right: Ping and the like only
  return c;
}

}  // namespace

Presented Presented::Of(const grpc::CallbackServerContext& ctx) {
  Presented p;
  p.peer = ctx.peer();
  const auto& md = ctx.client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    p.authorization.emplace(it->second.data(), it->second.size());
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return p;
  bool tls = false;
  for (const grpc::string_ref& t :
       auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    const absl::string_view type(t.data(), t.size());
    tls |= type == GRPC_SSL_TRANSPORT_SECURITY_TYPE || type == GRPC_TLS_TRANSPORT_SECURITY_TYPE;
  }
  if (!tls) return p;
  // gRPC lists every subjectAltName entry (DNS, URI, e-mail, IP) under this one property.
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
    p.sans.emplace_back(v.data(), v.size());
  }
  return p;
}

absl::Status Caller::Allows(absl::string_view volume, Right right) const {
  if (credential_ == nullptr) return absl::OkStatus();
  return TokenAuth::Allows(*credential_, volume, right);
}

bool Caller::MaySee(absl::string_view volume) const {
  return credential_ == nullptr || credential_->get.Contains(volume) ||
         credential_->put.Contains(volume);
}

absl::Status Caller::AllowsAdmin() const {
  if (credential_ == nullptr || credential_->admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "credential '", credential_->label,
      "' may not call the Admin service (its token file line needs admin=yes)"));
}

TokenAuth::TokenAuth() : internal_token_(RandomToken()) {}

void TokenAuth::Set(std::vector<Credential> credentials) {
  absl::MutexLock lock(&mu_);
  auto next = std::make_shared<CredentialSet>();
  next->generation = generation_.load(std::memory_order_relaxed) + 1;
  const bool on = !credentials.empty();
  next->credentials = std::move(credentials);
  next->internal = InternalCredential(internal_token_);
  set_ = std::move(next);
  enabled_.store(on, std::memory_order_release);
  generation_.store(set_->generation, std::memory_order_release);
}

absl::StatusOr<const Credential*> TokenAuth::Match(const std::vector<Credential>& credentials,
                                                   const std::string* authorization,
                                                   const std::vector<std::string>& sans) {
  bool file_has_tokens = false, file_has_sans = false;
  for (const Credential& c : credentials) {
    (c.kind == Credential::Kind::kToken ? file_has_tokens : file_has_sans) = true;
  }
  if (authorization != nullptr && absl::StartsWithIgnoreCase(*authorization, kScheme)) {
    const absl::string_view presented = absl::string_view(*authorization).substr(kScheme.size());
    const Credential* found = nullptr;
    for (const Credential& c : credentials) {  // every line: no early exit on a match
      if (c.kind == Credential::Kind::kToken && TokenEquals(presented, c.value)) found = &c;
    }
    if (found == nullptr) {
      return absl::PermissionDeniedError("the token presented is not accepted by this daemon");
    }
    return found;
  }
  for (const Credential& c : credentials) {
    if (c.kind != Credential::Kind::kSan) continue;
    for (const std::string& san : sans) {
      if (san == c.value) return &c;
    }
  }
  std::string how;
  if (file_has_tokens) {
    how = "a token: send metadata 'authorization: Bearer <token>' (gdrctl --token-file, "
          "ClientOptions::token)";
  }
  if (file_has_sans) {
    absl::StrAppend(&how, how.empty() ? "" : ", or ",
                    "a TLS client certificate with a subjectAltName that a san: line of its "
                    "token file names");
    if (!sans.empty()) {
      absl::StrAppend(&how, " (the certificate presented has ", sans.size(),
                      " subjectAltNames, none of them listed)");
    }
  }
  return absl::UnauthenticatedError(absl::StrCat("this daemon requires ", how));
}

absl::Status TokenAuth::Allows(const Credential& credential, absl::string_view volume,
                               Right right) {
  if (credential.volumes(right).Contains(volume)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "credential '", credential.label, "' may not ", RightName(right),
      right == Right::kGet ? " from " : " to ",
      IsVolumeNameSyntax(volume) ? absl::StrCat("volume '", volume, "'")
                                 : std::string("a malformed volume name"),
      " (granted: ", credential.DescribeGrants(), ")"));
}

absl::StatusOr<Caller> TokenAuth::Identify(const Presented& presented) const {
  std::shared_ptr<const CredentialSet> set;
  {
    absl::MutexLock lock(&mu_);
    set = set_;
  }
  if (set == nullptr) return Caller();
  if (set->credentials.empty()) return Caller(std::move(set), nullptr);
  const std::string* authorization =
      presented.authorization ? &*presented.authorization : nullptr;
  if (authorization != nullptr && absl::StartsWithIgnoreCase(*authorization, kScheme) &&
      TokenEquals(absl::string_view(*authorization).substr(kScheme.size()), internal_token_)) {
    const Credential* internal = &set->internal;
    return Caller(std::move(set), internal);
  }
  static const std::vector<std::string> kNoSans;
  absl::StatusOr<const Credential*> c = Match(
      set->credentials, authorization,
      client_certificates_verified() ? presented.sans : kNoSans);
  if (!c.ok()) {
    GDR_LOG_EVERY_N_SEC(kWarning, 5) << "refused a call from " << presented.peer << ": "
                                     << c.status().message();
    return c.status();
  }
  return Caller(std::move(set), *c);
}

}  // namespace gdr
