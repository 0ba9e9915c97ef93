// Unit tests of the admission and grant rules (daemon/service/token_auth.h) on metadata values
// and SAN lists, without TLS; the integration suites (tests/integration/token_auth_test.cc,
// grants_test.cc) check them on real calls.
#include "daemon/service/token_auth.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

std::vector<Credential> Parse(const std::string& text) {
  absl::StatusOr<std::vector<Credential>> c = ParseTokenFile(text, "test");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : std::vector<Credential>{};
}

const std::vector<Credential>& Accepted() {
  static const auto* c = new std::vector<Credential>(Parse(
      "current-token-0123456789\n"
      "previous-token-0123456789 name=reader get=v1,v2\n"
      "san:spiffe://example.org/trainer name=trainer put=v2\n"
      "san:node7.example.org get=*\n"));
  return *c;
}

absl::StatusOr<const Credential*> MatchValue(const char* value,
                                             const std::vector<std::string>& sans = {}) {
  std::string v = value;
  return TokenAuth::Match(Accepted(), &v, sans);
}

absl::StatusCode Code(const char* value) { return MatchValue(value).status().code(); }

TEST(TokenAuthRuleTest, NoneOrNotBearerIsUnauthenticated) {
  EXPECT_EQ(TokenAuth::Match(Accepted(), nullptr, {}).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code("current-token-0123456789"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code("Basic current-token-0123456789"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code(""), absl::StatusCode::kUnauthenticated);
  absl::Status s = TokenAuth::Match(Accepted(), nullptr, {}).status();
  EXPECT_THAT(s.message(), HasSubstr("--token-file"));
  EXPECT_THAT(s.message(), HasSubstr("client certificate"));
}

TEST(TokenAuthRuleTest, EveryAcceptedTokenIsItsLineAndOthersAreDenied) {
  absl::StatusOr<const Credential*> c = MatchValue("Bearer current-token-0123456789");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "token on line 1");
  c = MatchValue("bearer previous-token-0123456789");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "reader");
  EXPECT_EQ(Code("Bearer current-token-012345678"), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Code("Bearer current-token-0123456789 "), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Code("Bearer "), absl::StatusCode::kPermissionDenied);
  // A san: value is no token.
  EXPECT_EQ(Code("Bearer node7.example.org"), absl::StatusCode::kPermissionDenied);
  absl::Status s = MatchValue("Bearer some-other-token-000000").status();
  EXPECT_FALSE(absl::StrContains(s.message(), "some-other-token")) << s.message();
}

TEST(TokenAuthRuleTest, ACertificateSanPicksItsLineWhenNoTokenIsSent) {
  absl::StatusOr<const Credential*> c =
      TokenAuth::Match(Accepted(), nullptr, {"other.example.org", "spiffe://example.org/trainer"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "trainer");
  // A not-Bearer authorization is no token: the certificate decides.
  c = MatchValue("Basic xyz", {"node7.example.org"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "san:node7.example.org");
  // Several lines match: the first in file order.
  c = TokenAuth::Match(Accepted(), nullptr, {"node7.example.org", "spiffe://example.org/trainer"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "trainer");
  // Exact matches only.
  c = TokenAuth::Match(Accepted(), nullptr, {"NODE7.example.org", "node7.example.org.",
                                              "spiffe://example.org/trainer/x"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(c.status().message(), HasSubstr("3 subjectAltNames, none of them listed"));
}

TEST(TokenAuthRuleTest, APresentedTokenIsJudgedAloneEvenWithAMatchingCertificate) {
  // A token that is not accepted is refused even when the certificate would be.
  EXPECT_EQ(MatchValue("Bearer not-an-accepted-token-00", {"node7.example.org"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // An accepted token's line applies, not the certificate's.
  absl::StatusOr<const Credential*> c =
      MatchValue("Bearer previous-token-0123456789", {"node7.example.org"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->label, "reader");
}

TEST(TokenAuthRuleTest, AFileOfIdentitiesAcceptsNoToken) {
  const std::vector<Credential> only_sans = Parse("san:a.example.org get=v1\n");
  std::string v = "Bearer current-token-0123456789";
  EXPECT_EQ(TokenAuth::Match(only_sans, &v, {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::Status s = TokenAuth::Match(only_sans, nullptr, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("requires a TLS client certificate"));
  EXPECT_FALSE(absl::StrContains(s.message(), "token-file")) << s.message();
  EXPECT_TRUE(TokenAuth::Match(only_sans, nullptr, {"a.example.org"}).ok());
}

TEST(TokenAuthRuleTest, GrantsDecideEachVolumeAndRight) {
  const Credential& reader = Accepted()[1];
  EXPECT_TRUE(TokenAuth::Allows(reader, "v1", Right::kGet).ok());
  EXPECT_TRUE(TokenAuth::Allows(reader, "v2", Right::kGet).ok());
  absl::Status s = TokenAuth::Allows(reader, "v2", Right::kPut);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "credential 'reader' may not put to volume 'v2' (granted: get v1,v2; put none)");
  s = TokenAuth::Allows(reader, "v3", Right::kGet);
  EXPECT_EQ(s.message(),
            "credential 'reader' may not get from volume 'v3' (granted: get v1,v2; put none)");
  // A hostile volume name is not echoed.
  s = TokenAuth::Allows(reader, std::string("v\n\x01") + std::string(100, 'x'), Right::kGet);
  EXPECT_THAT(s.message(), HasSubstr("may not get from a malformed volume name"));

  const Credential& all = Accepted()[0];
  EXPECT_TRUE(TokenAuth::Allows(all, "anything", Right::kGet).ok());
  EXPECT_TRUE(TokenAuth::Allows(all, "anything", Right::kPut).ok());
  const Credential& trainer = Accepted()[2];
  EXPECT_TRUE(TokenAuth::Allows(trainer, "v2", Right::kPut).ok());
  EXPECT_EQ(TokenAuth::Allows(trainer, "v2", Right::kGet).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(TokenAuthTest, SetTurnsTheCheckOnAndOffAndCallersCarryTheirGrants) {
  TokenAuth auth;
  EXPECT_FALSE(auth.enabled());
  Presented anyone;
  absl::StatusOr<Caller> open = auth.Identify(anyone);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->Allows("v9", Right::kPut).ok());
  EXPECT_TRUE(open->MaySee("v9"));

  auth.Set(Accepted());
  EXPECT_TRUE(auth.enabled());
  EXPECT_EQ(auth.Identify(anyone).status().code(), absl::StatusCode::kUnauthenticated);
  Presented reader;
  reader.authorization = "Bearer previous-token-0123456789";
  absl::StatusOr<Caller> c = auth.Identify(reader);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->Allows("v1", Right::kGet).ok());
  EXPECT_EQ(c->Allows("v1", Right::kPut).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(c->MaySee("v2"));
  EXPECT_FALSE(c->MaySee("v3"));
  EXPECT_EQ(c->generation(), auth.generation());
  Presented trainer;
  trainer.sans = {"spiffe://example.org/trainer"};
  // Certificates count only once the server says it verifies them.
  EXPECT_EQ(auth.Identify(trainer).status().code(), absl::StatusCode::kUnauthenticated);
  auth.set_client_certificates_verified(true);
  c = auth.Identify(trainer);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->MaySee("v2"));
  EXPECT_FALSE(c->MaySee("v1"));

  // A caller keeps the grants it was identified with; identified again it gets the new ones.
  const uint64_t before = auth.generation();
  absl::StatusOr<Caller> held = auth.Identify(reader);
  auth.Set(Parse("previous-token-0123456789 name=reader put=v3\n"));
  EXPECT_NE(auth.generation(), before);
  EXPECT_TRUE(held->Allows("v1", Right::kGet).ok());
  c = auth.Identify(reader);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->Allows("v1", Right::kGet).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(c->Allows("v3", Right::kPut).ok());
  EXPECT_EQ(auth.Identify(trainer).status().code(), absl::StatusCode::kUnauthenticated);

  auth.Set({});
  EXPECT_FALSE(auth.enabled());
  EXPECT_TRUE(auth.Identify(anyone).ok());
}

TEST(TokenAuthTest, TheInternalTokenIsAcceptedWithNoVolumeRight) {
  TokenAuth auth;
  TokenAuth other;
  EXPECT_EQ(auth.InternalToken().size(), 64u);
  EXPECT_NE(auth.InternalToken(), other.InternalToken());
  auth.Set(Parse("san:only.example.org get=*\n"));  // no token line at all
  Presented self;
  self.authorization = "Bearer " + auth.InternalToken();
  absl::StatusOr<Caller> c = auth.Identify(self);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->Allows("v1", Right::kGet).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(c->MaySee("v1"));
  self.authorization = "Bearer " + other.InternalToken();
  EXPECT_EQ(auth.Identify(self).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace gdr
