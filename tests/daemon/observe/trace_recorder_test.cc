// TraceRecorder: ops recorded from many threads all reach the file by Close; the cap stops
// recording and counts the drops; Reopen starts a new file at the path; ops after Close are
// dropped, not lost silently.
#include "daemon/observe/trace_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gdr {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat("/tmp/trace_recorder_test_", ::getpid(), "_", name);
}

trace::OpEvent Event(int thread, int i) {
  trace::OpEvent e;
  e.start_unix_ns = absl::GetCurrentTimeNanos();
  e.latency_ns = 1000;
  e.offset = static_cast<uint64_t>(thread) << 32 | static_cast<uint64_t>(i);
  e.length = 4096;
  e.volume = "vol0";
  e.client = absl::StrCat("ipv4:127.0.0.1:", 5000 + thread);
  return e;
}

TEST(TraceRecorder, OpsFromManyThreadsAllReachTheFile) {
  const std::string path = TempPath("threads");
  auto r = TraceRecorder::Create(path, uint64_t{64} << 20);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 5000; ++i) (*r)->Record(Event(t, i));
    });
  }
  for (auto& t : threads) t.join();
  (*r)->Close();
  const TraceRecorder::Stats s = (*r)->stats();
  EXPECT_EQ(s.records, 20000u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(s.file, path);
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->ops.size(), 20000u);
  EXPECT_EQ(t->clients.size(), 4u);
  std::set<uint64_t> offsets;
  for (const trace::TraceOp& op : t->ops) offsets.insert(op.offset);
  EXPECT_EQ(offsets.size(), 20000u);
  EXPECT_EQ(s.bytes, trace::kHeaderBytes + 20000 * trace::kRecordBytes +
                         (trace::kStringEntryBytes + 4) + 4 * (trace::kStringEntryBytes + 19));
  // After Close: dropped and counted.
  (*r)->Record(Event(0, 0));
  EXPECT_EQ((*r)->stats().dropped, 1u);
  ::unlink(path.c_str());
}

TEST(TraceRecorder, TheCapStopsRecordingAndCountsTheRest) {
  const std::string path = TempPath("cap");
  auto r = TraceRecorder::Create(path, 4096);
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 1000; ++i) (*r)->Record(Event(0, i));
  (*r)->Close();
  const TraceRecorder::Stats s = (*r)->stats();
  const uint64_t fit = (4096 - trace::kHeaderBytes - 2 * trace::kStringEntryBytes - 4 - 19) /
                       trace::kRecordBytes;
  EXPECT_EQ(s.records, fit);
  EXPECT_EQ(s.dropped, 1000 - fit);
  EXPECT_LE(s.bytes, 4096u);
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ops.size(), fit);
  ::unlink(path.c_str());
}

TEST(TraceRecorder, ReopenStartsANewFileWithTheCapAnew) {
  const std::string path = TempPath("reopen");
  const std::string moved = path + ".1";
  auto r = TraceRecorder::Create(path, 4096);
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 200; ++i) (*r)->Record(Event(0, i));  // past the cap
  ASSERT_EQ(std::rename(path.c_str(), moved.c_str()), 0);
  (*r)->Reopen();
  // The reopen happens on the writer thread: wait for the new file.
  for (int i = 0; i < 500 && ::access(path.c_str(), F_OK) != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(::access(path.c_str(), F_OK), 0);
  for (int i = 0; i < 3; ++i) (*r)->Record(Event(1, i));
  (*r)->Close();
  absl::StatusOr<trace::Trace> old = trace::ReadTraceFile(moved);
  ASSERT_TRUE(old.ok()) << old.status();
  absl::StatusOr<trace::Trace> now = trace::ReadTraceFile(path);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->ops.size(), 3u);
  EXPECT_EQ((*r)->stats().records, old->ops.size() + 3);
  EXPECT_EQ((*r)->stats().dropped, 200 - old->ops.size());
  ::unlink(path.c_str());
  ::unlink(moved.c_str());
}

}  // namespace
}  // namespace gdr
