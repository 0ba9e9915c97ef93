// Unit tests of common/wire/token_file.h: the token file format (bare tokens as before grants,
// san: identities, name=/get=/put= grants), every error it refuses (naming file and line, never
// quoting a token), the client's first-token rule, and the comparison.
#include "common/wire/token_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kTok[] = "secret-token-abcdefghijkl";

std::vector<std::string> Values(const std::vector<Credential>& cs) {
  std::vector<std::string> out;
  for (const Credential& c : cs) out.push_back(c.value);
  return out;
}

// The error of parsing `text` (which must fail), checked to name file and line and never to
// hold the secret kTok.
std::string ErrorOf(const std::string& text, int line) {
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile(text, "tok");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << text;
  const std::string msg(t.status().message());
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("tok:", line, ": "))) << text;
  EXPECT_FALSE(absl::StrContains(msg, "secret-token")) << "a token was quoted: " << msg;
  return msg;
}

TEST(TokenFileTest, CommentsBlankLinesAndWhitespaceAreSkipped) {
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile(
      "# rotation: new first\n\n  new-token-abcdefghijkl  \r\n\told-token-abcdefghijkl\n# end",
      "f");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Values(*t), ElementsAre("new-token-abcdefghijkl", "old-token-abcdefghijkl"));
}

TEST(TokenFileTest, ABareTokenLineMayDoEverythingAsBeforeGrants) {
  // Base64 padding and '#' inside a token stay part of it: the first field is the credential.
  absl::StatusOr<std::vector<Credential>> t =
      ParseTokenFile("abcdefghijklmnopqrstuvwx==\nab#cdefghijklmnopqr\n", "f");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  const Credential& c = (*t)[0];
  EXPECT_EQ(c.kind, Credential::Kind::kToken);
  EXPECT_EQ(c.value, "abcdefghijklmnopqrstuvwx==");
  EXPECT_EQ(c.label, "token on line 1");
  EXPECT_TRUE(c.get.all);
  EXPECT_TRUE(c.put.all);
  EXPECT_EQ(c.DescribeGrants(), "get *; put *");
  EXPECT_EQ((*t)[1].value, "ab#cdefghijklmnopqr");
  EXPECT_EQ((*t)[1].label, "token on line 2");
}

TEST(TokenFileTest, AdminIsItsOwnRightBesideTheVolumeGrants) {
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile(
      "abcdefghijklmnopqrstuvwx name=ops admin=yes\n"
      "bbcdefghijklmnopqrstuvwx name=ro get=v1 admin=no\n"
      "cbcdefghijklmnopqrstuvwx\n",
      "f");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)[0].admin);
  EXPECT_TRUE((*t)[0].get.all);  // no get=/put=: every volume, as a bare line
  EXPECT_EQ((*t)[0].DescribeGrants(), "get *; put *; admin");
  EXPECT_FALSE((*t)[1].admin);
  EXPECT_EQ((*t)[1].DescribeGrants(), "get v1; put none");
  EXPECT_FALSE((*t)[2].admin);
  for (const char* bad : {"abcdefghijklmnopqrstuvwx admin=true\n",
                          "abcdefghijklmnopqrstuvwx admin=yes admin=yes\n"}) {
    absl::StatusOr<std::vector<Credential>> r = ParseTokenFile(bad, "f");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "admin=")) << r.status();
  }
}

TEST(TokenFileTest, EveryLineShape) {
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile(
      std::string(kTok) + " name=reader get=v2,v1\n"
      "writer-token-0123456789\tput=*   get=v1 # both on v1, puts anywhere\n"
      "san:spiffe://example.org/ns/a/sa/trainer get=*\n"
      "san:node7.example.org put=scratch name=node7\n"
      "san:10.0.0.7\n",
      "f");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 5u);
  const Credential& reader = (*t)[0];
  EXPECT_EQ(reader.label, "reader");
  EXPECT_THAT(reader.get.names, ElementsAre("v1", "v2"));  // sorted
  EXPECT_TRUE(reader.put.empty());
  EXPECT_EQ(reader.DescribeGrants(), "get v1,v2; put none");
  EXPECT_TRUE(reader.get.Contains("v1"));
  EXPECT_FALSE(reader.get.Contains("v3"));
  EXPECT_FALSE(reader.put.Contains("v1"));

  const Credential& writer = (*t)[1];
  EXPECT_EQ(writer.label, "token on line 2");
  EXPECT_EQ(writer.DescribeGrants(), "get v1; put *");

  const Credential& trainer = (*t)[2];
  EXPECT_EQ(trainer.kind, Credential::Kind::kSan);
  EXPECT_EQ(trainer.value, "spiffe://example.org/ns/a/sa/trainer");
  EXPECT_EQ(trainer.label, "san:spiffe://example.org/ns/a/sa/trainer");
  EXPECT_EQ(trainer.DescribeGrants(), "get *; put none");

  EXPECT_EQ((*t)[3].label, "node7");
  EXPECT_EQ((*t)[3].DescribeGrants(), "get none; put scratch");
  EXPECT_EQ((*t)[4].value, "10.0.0.7");
  EXPECT_EQ((*t)[4].DescribeGrants(), "get *; put *");
  EXPECT_EQ(DescribeCredentials(*t), "2 tokens, 3 certificate identities");
  EXPECT_EQ(DescribeCredentials({}), "none");
}

TEST(TokenFileTest, AFileOfIdentitiesOnlyIsValid) {
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile("san:a.example.org get=v1\n", "f");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(DescribeCredentials(*t), "1 certificate identity");
}

TEST(TokenFileTest, BadTokensAreRefusedNamingTheLineNotTheToken) {
  EXPECT_THAT(ErrorOf("# c\nsecret-token\n", 2), HasSubstr("16 to 1024 characters"));
  EXPECT_THAT(ErrorOf(std::string(kMaxTokenLength + 1, 'x'), 1), HasSubstr("(this one has"));
  EXPECT_THAT(ErrorOf("secret-token-\x01-abcdefghijkl", 1), HasSubstr("found byte 1"));
  EXPECT_THAT(ErrorOf("secret-token-\xc3\xa9-abcdefghijkl", 1), HasSubstr("printable ASCII"));
  absl::StatusOr<std::vector<Credential>> t = ParseTokenFile("# only a comment\n\n", "tok");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("no token"));
}

TEST(TokenFileTest, BadIdentitiesAreRefused) {
  EXPECT_THAT(ErrorOf("san:", 1), HasSubstr("san: needs a value"));
  EXPECT_THAT(ErrorOf("san:" + std::string(1025, 'a'), 1), HasSubstr("san: needs a value"));
  EXPECT_THAT(ErrorOf("san:a\x7f.example", 1), HasSubstr("found byte 127"));
}

TEST(TokenFileTest, BadFieldsAreRefusedWithoutQuotingAToken) {
  const std::string t(kTok);
  // Two tokens on one line: the second is not a key and must not be echoed.
  EXPECT_THAT(ErrorOf(t + " secret-token-second-one", 1), HasSubstr("field 2 is not KEY=VALUE"));
  // A token with '=' pasted as a field: an unknown key, not quoted.
  std::string msg = ErrorOf(t + " secret-token-xyzABC0123=", 1);
  EXPECT_THAT(msg, HasSubstr("field 2: unknown key (keys: name, get, put, admin)"));
  // A short lowercase key is quoted, to help.
  EXPECT_THAT(ErrorOf(t + " gets=v1", 1), HasSubstr("unknown key 'gets'"));
  EXPECT_THAT(ErrorOf(t + " get=v1 get=v2", 1), HasSubstr("get= given twice"));
  EXPECT_THAT(ErrorOf(t + " name=a name=b", 1), HasSubstr("name= given twice"));
  EXPECT_THAT(ErrorOf(t + " put=v1 put=*", 1), HasSubstr("put= given twice"));
  EXPECT_THAT(ErrorOf(t + " name=", 1), HasSubstr("name= must be 1-64"));
  EXPECT_THAT(ErrorOf(t + " name=a'b", 1), HasSubstr("name= must be 1-64"));
  EXPECT_THAT(ErrorOf(t + " name=" + std::string(65, 'n'), 1), HasSubstr("name= must be 1-64"));
}

TEST(TokenFileTest, BadVolumeListsAreRefused) {
  const std::string t(kTok);
  EXPECT_THAT(ErrorOf(t + " get=", 1), HasSubstr("get= names no volume"));
  EXPECT_THAT(ErrorOf(t + " put=v1,,v2", 1), HasSubstr("put= holds an empty volume name"));
  EXPECT_THAT(ErrorOf(t + " put=v1,", 1), HasSubstr("put= holds an empty volume name"));
  EXPECT_THAT(ErrorOf(t + " get=,v1", 1), HasSubstr("get= holds an empty volume name"));
  EXPECT_THAT(ErrorOf(t + " get=*,v1", 1), HasSubstr("takes no names beside it"));
  EXPECT_THAT(ErrorOf(t + " get=v1,*", 1), HasSubstr("takes no names beside it"));
  EXPECT_THAT(ErrorOf(t + " get=v1,v2,v1", 1), HasSubstr("lists volume 'v1' more than once"));
  EXPECT_THAT(ErrorOf(t + " get=v/../1", 1),
              HasSubstr("get= volume 'v/../1' is not a volume name (1..255 characters"));
  EXPECT_THAT(ErrorOf(t + " put=" + std::string(256, 'v'), 1), HasSubstr("...'"));
  EXPECT_THAT(ErrorOf(t + " put=v\x01", 1), HasSubstr("'v\\x01'"));
}

TEST(TokenFileTest, RepeatsAcrossLinesAreRefusedNamingBothLines) {
  const std::string t(kTok);
  EXPECT_THAT(ErrorOf(t + "\n# c\n" + t + " get=v1\n", 3),
              HasSubstr("the same token is already on line 1"));
  EXPECT_THAT(ErrorOf("san:a.example.org\nsan:a.example.org put=v1\n", 2),
              HasSubstr("the same identity san:a.example.org is already on line 1"));
  EXPECT_THAT(ErrorOf(t + " name=ops\nsan:a.example.org name=ops\n", 2),
              HasSubstr("name 'ops' is already used on line 1"));
  // A name may not pass for another line's default label either.
  EXPECT_THAT(ErrorOf("san:a.example.org\n" + t + " name=san:a.example.org\n", 2),
              HasSubstr("name 'san:a.example.org' is already used on line 1"));
}

TEST(TokenFileTest, ReadsAFileAndNamesAMissingOne) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/token_file_test.tokens.", ::getpid());
  std::ofstream(path, std::ios::trunc) << "a-token-of-enough-length get=v1\n";
  absl::StatusOr<std::vector<Credential>> t = ReadTokenFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Values(*t), ElementsAre("a-token-of-enough-length"));

  t = ReadTokenFile(path + ".absent");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr(".absent"));
  std::remove(path.c_str());
}

TEST(TokenFileTest, AClientPresentsTheFirstTokenWithoutItsGrants) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/token_file_test.client.", ::getpid());
  std::ofstream(path, std::ios::trunc)
      << "# mine\nsan:me.example.org get=*\nfirst-token-0123456789 name=me get=v1 put=v1\n"
         "second-token-0123456789\n";
  absl::StatusOr<std::string> token = ReadClientToken(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "first-token-0123456789");

  std::ofstream(path, std::ios::trunc) << "old-format-token-0123456789\n";
  token = ReadClientToken(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "old-format-token-0123456789");

  std::ofstream(path, std::ios::trunc) << "san:me.example.org\n";
  token = ReadClientToken(path);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(), HasSubstr("holds no token"));

  std::ofstream(path, std::ios::trunc) << "first-token-0123456789 get=\n";
  token = ReadClientToken(path);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(), HasSubstr(":1: get= names no volume"));
  std::remove(path.c_str());
}

// The example shipped in deploy/ parses, with the grants its comments promise.
TEST(TokenFileTest, TheDeployExampleParses) {
  absl::StatusOr<std::vector<Credential>> t =
      ReadTokenFile(std::string(GDR_SOURCE_DIR) + "/deploy/systemd/tokens.example");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 5u);
  EXPECT_EQ((*t)[0].DescribeGrants(), "get *; put *");
  EXPECT_EQ((*t)[1].DescribeGrants(), "get checkpoints,datasets; put checkpoints");
  EXPECT_EQ((*t)[2].DescribeGrants(), "get none; put datasets");
  EXPECT_EQ((*t)[3].kind, Credential::Kind::kSan);
  EXPECT_EQ((*t)[3].DescribeGrants(), "get *; put none");
  EXPECT_EQ((*t)[4].label, "node7");
}

TEST(TokenFileTest, VolumeNameSyntaxIsTheStoresRule) {
  EXPECT_TRUE(IsVolumeNameSyntax("vol0"));
  EXPECT_TRUE(IsVolumeNameSyntax("A-b_c.9"));
  EXPECT_TRUE(IsVolumeNameSyntax(std::string(255, 'v')));
  EXPECT_TRUE(IsVolumeNameSyntax("ckpt/step-1/rank0.safetensors"));
  EXPECT_FALSE(IsVolumeNameSyntax("a/../b"));
  EXPECT_FALSE(IsVolumeNameSyntax(""));
  EXPECT_FALSE(IsVolumeNameSyntax(std::string(256, 'v')));
  EXPECT_FALSE(IsVolumeNameSyntax("*"));
  EXPECT_FALSE(IsVolumeNameSyntax("a b"));
}

TEST(TokenFileTest, TokenEqualsComparesWholeValues) {
  EXPECT_TRUE(TokenEquals("same-token-value", "same-token-value"));
  EXPECT_FALSE(TokenEquals("same-token-valuE", "same-token-value"));
  EXPECT_FALSE(TokenEquals("same-token-valu", "same-token-value"));
  EXPECT_FALSE(TokenEquals("", "same-token-value"));
}

}  // namespace
}  // namespace gdr
