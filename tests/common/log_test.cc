// Unit tests of the logger's rate limiting and journald detection (common/base/log.h).
#include "common/base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(LogTest, RateLimitCountsWhatItDrops) {
  log_internal::RateLimitState state;
  uint64_t dropped = 99;
  const int64_t hour = int64_t{3600} * 1'000'000'000;
  ASSERT_TRUE(log_internal::RateLimitAllows(state, hour, &dropped));
  EXPECT_EQ(dropped, 0u);
  for (int i = 0; i < 41; ++i) EXPECT_FALSE(log_internal::RateLimitAllows(state, hour, &dropped));
  // Period of zero: the next call passes and reports the 41 dropped.
  EXPECT_TRUE(log_internal::RateLimitAllows(state, 0, &dropped));
  EXPECT_EQ(dropped, 41u);
}

TEST(LogTest, JournalStreamMustNameThisFd) {
  char path[] = "/tmp/log_test.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const std::string same = absl::StrCat(st.st_dev, ":", st.st_ino);
  const std::string other = absl::StrCat(st.st_dev, ":", st.st_ino + 1);
  EXPECT_TRUE(log_internal::IsJournalStream(fd, same.c_str()));
  EXPECT_FALSE(log_internal::IsJournalStream(fd, other.c_str()));
  EXPECT_FALSE(log_internal::IsJournalStream(fd, nullptr));
  EXPECT_FALSE(log_internal::IsJournalStream(fd, ""));
  EXPECT_FALSE(log_internal::IsJournalStream(fd, "garbage"));
  ::close(fd);
  ::unlink(path);
}

}  // namespace
}  // namespace gdr
