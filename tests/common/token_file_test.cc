// Unit tests of common/token_file.h: the token file format, its errors (which never quote a
// token), and the comparison.
#include "common/token_file.h"

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TokenFileTest, CommentsBlankLinesAndWhitespaceAreSkipped) {
  absl::StatusOr<std::vector<std::string>> t = ParseTokens(
      "# rotation: new first\n\n  new-token-abcdefghijkl  \r\n\told-token-abcdefghijkl\n# end",
      "f");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre("new-token-abcdefghijkl", "old-token-abcdefghijkl"));
}

TEST(TokenFileTest, BadTokensAreRefusedNamingTheLineNotTheToken) {
  absl::StatusOr<std::vector<std::string>> t = ParseTokens("# c\nshort-secret\n", "tok");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("tok:2:"));
  EXPECT_FALSE(absl::StrContains(t.status().message(), "short-secret"));

  t = ParseTokens(std::string(kMaxTokenLength + 1, 'x'), "tok");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);

  t = ParseTokens("token with spaces inside it", "tok");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("printable ASCII"));

  t = ParseTokens("# only a comment\n\n", "tok");
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("no token"));
}

TEST(TokenFileTest, ReadsAFileAndNamesAMissingOne) {
  const std::string path = ::testing::TempDir() + "/token_file_test.tokens";
  std::ofstream(path, std::ios::trunc) << "a-token-of-enough-length\n";
  absl::StatusOr<std::vector<std::string>> t = ReadTokenFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(*t, ElementsAre("a-token-of-enough-length"));

  t = ReadTokenFile(path + ".absent");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr(".absent"));
}

TEST(TokenFileTest, TokenEqualsComparesWholeValues) {
  EXPECT_TRUE(TokenEquals("same-token-value", "same-token-value"));
  EXPECT_FALSE(TokenEquals("same-token-valuE", "same-token-value"));
  EXPECT_FALSE(TokenEquals("same-token-valu", "same-token-value"));
  EXPECT_FALSE(TokenEquals("", "same-token-value"));
}

}  // namespace
}  // namespace gdr
