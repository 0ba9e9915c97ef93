// Unit tests of the bearer-token rule (daemon/token_auth.h) on metadata values; the integration
// suite (tests/integration/token_auth_test.cc) checks it on real calls.
#include "daemon/service/token_auth.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

const std::vector<std::string> kAccepted = {"current-token-0123456789", "previous-token-0123456789"};

absl::StatusCode Code(const char* value) {
  std::string v = value;
  return TokenAuth::CheckValue(kAccepted, &v).code();
}

TEST(TokenAuthRuleTest, NoneOrNotBearerIsUnauthenticated) {
  EXPECT_EQ(TokenAuth::CheckValue(kAccepted, nullptr).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code("current-token-0123456789"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code("Basic current-token-0123456789"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code(""), absl::StatusCode::kUnauthenticated);
}

TEST(TokenAuthRuleTest, EveryAcceptedTokenPassesAndOthersAreDenied) {
  EXPECT_EQ(Code("Bearer current-token-0123456789"), absl::StatusCode::kOk);
  EXPECT_EQ(Code("bearer previous-token-0123456789"), absl::StatusCode::kOk);
  EXPECT_EQ(Code("Bearer current-token-012345678"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Code("Bearer current-token-0123456789 "), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Code("Bearer "), absl::StatusCode::kPermissionDenied);
  std::string wrong = "Bearer some-other-token-000000";
  absl::Status s = TokenAuth::CheckValue(kAccepted, &wrong);
  EXPECT_FALSE(absl::StrContains(s.message(), "some-other-token")) << s.message();
}

TEST(TokenAuthRuleTest, SetTurnsTheCheckOnAndOff) {
  TokenAuth auth;
  EXPECT_FALSE(auth.enabled());
  EXPECT_EQ(auth.AnyToken(), "");
  auth.Set(kAccepted);
  EXPECT_TRUE(auth.enabled());
  EXPECT_EQ(auth.AnyToken(), kAccepted.front());
  auth.Set({});
  EXPECT_FALSE(auth.enabled());
}

}  // namespace
}  // namespace gdr
