// gdrctl's size and offset flags: units as gdr::ParseSize reads them, the default shown the way
// it is typed, and a refusal that names the flag and what is wrong.
#include "client/gdrctl/size_flag.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gdrctl {
namespace {

// Parses `args` (after the program name) with one -o,--offset option; the error text or "".
std::string Parse(std::vector<std::string> args, uint64_t* offset) {
  CLI::App app{"test"};
  AddSizeOption(&app, "-o,--offset", offset, "offset");
  std::vector<const char*> argv = {"prog"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(SizeFlagTest, TakesUnits) {
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"0", 0},           {"4096", 4096},           {"1MiB", 1 << 20},
      {"512MiB", 512ull << 20}, {"2g", 2ull << 30}, {"64KiB", 64 << 10}};
  for (const auto& [text, want] : cases) {
    uint64_t v = 7;
    EXPECT_EQ(Parse({"-o", text}, &v), "") << text;
    EXPECT_EQ(v, want) << text;
    v = 7;
    EXPECT_EQ(Parse({"--offset=" + text}, &v), "") << text;
    EXPECT_EQ(v, want) << text;
  }
}

TEST(SizeFlagTest, AbsentKeepsTheDefault) {
  uint64_t v = 12345;
  EXPECT_EQ(Parse({}, &v), "");
  EXPECT_EQ(v, 12345u);
}

TEST(SizeFlagTest, RefusalNamesTheFlagAndTheProblem) {
  uint64_t v = 0;
  std::string err = Parse({"-o", "12XB"}, &v);
  EXPECT_TRUE(absl::StrContains(err, "-o,--offset")) << err;
  EXPECT_TRUE(absl::StrContains(err, "unknown unit 'xb'")) << err;
  err = Parse({"-o", "lots"}, &v);
  EXPECT_TRUE(absl::StrContains(err, "must start with a number")) << err;
  err = Parse({"-o", "99999999999TiB"}, &v);
  EXPECT_TRUE(absl::StrContains(err, "overflows")) << err;
  EXPECT_EQ(v, 0u);
}

TEST(SizeFlagTest, HelpShowsTheDefaultWithItsUnit) {
  CLI::App app{"test"};
  uint64_t size = 4096, offset = 0;
  AddSizeOption(&app, "-s,--size", &size, "bytes");
  AddSizeOption(&app, "-o,--offset", &offset, "offset");
  const std::string help = app.help();
  EXPECT_TRUE(absl::StrContains(help, "SIZE=4KiB")) << help;
  EXPECT_TRUE(absl::StrContains(help, "SIZE=0B")) << help;
}

}  // namespace
}  // namespace gdrctl
