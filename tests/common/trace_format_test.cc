// The trace format: what is written reads back field for field, damaged files are refused
// naming where, and a writer with a size cap stops at it and counts what it drops.
#include "common/wire/trace_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gdr::trace {
namespace {

constexpr int64_t kStart = 1'700'000'000'000'000'000;

OpEvent Event(int i, const std::string& client, const std::string& volume) {
  OpEvent e;
  e.start_unix_ns = kStart + 1000 * i;
  e.latency_ns = 500 + i;
  e.offset = uint64_t{1} << 33 | static_cast<uint64_t>(i);
  e.length = 4096 * (i + 1);
  e.volume = volume;
  e.client = client;
  e.kind = i % 2 ? OpKind::kPut : OpKind::kGet;
  e.code = i == 3 ? 14 : 0;
  e.transport = static_cast<uint8_t>(i % 5);  // 0 (not recorded) and each transport
  return e;
}

std::string Encoded(int n) {
  std::string bytes = EncodeHeader(kStart);
  TraceEncoder enc(kStart);
  for (int i = 0; i < n; ++i) {
    enc.Encode(Event(i, absl::StrCat("ipv4:127.0.0.1:", 4000 + i % 2), i < 2 ? "vol0" : "vol1"),
               &bytes);
  }
  return bytes;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/trace_format_test_", ::getpid(), "_", name);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TraceFormat, RoundTripKeepsEveryField) {
  const std::string bytes = Encoded(5);
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version, kVersion);
  EXPECT_EQ(t->start_unix_ns, kStart);
  ASSERT_EQ(t->volumes, (std::vector<std::string>{"vol0", "vol1"}));
  ASSERT_EQ(t->clients,
            (std::vector<std::string>{"ipv4:127.0.0.1:4000", "ipv4:127.0.0.1:4001"}));
  ASSERT_EQ(t->ops.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const TraceOp& op = t->ops[i];
    const OpEvent e = Event(i, "", "");
    EXPECT_EQ(op.start_ns, 1000 * i);
    EXPECT_EQ(op.latency_ns, e.latency_ns);
    EXPECT_EQ(op.offset, e.offset);
    EXPECT_EQ(op.length, e.length);
    EXPECT_EQ(op.kind, e.kind);
    EXPECT_EQ(op.code, e.code);
    EXPECT_EQ(op.transport, e.transport);
    EXPECT_EQ(t->clients[op.client], absl::StrCat("ipv4:127.0.0.1:", 4000 + i % 2));
    EXPECT_EQ(t->volumes[op.volume], i < 2 ? "vol0" : "vol1");
  }
  // Names are defined once: header, 4 names, 5 records.
  EXPECT_EQ(bytes.size(), kHeaderBytes + 5 * kRecordBytes + 2 * (kStringEntryBytes + 4) +
                              2 * (kStringEntryBytes + 19));
}

TEST(TraceFormat, AnOpBegunBeforeTheHeaderKeepsItsNegativeStart) {
  std::string bytes = EncodeHeader(kStart);
  TraceEncoder enc(kStart);
  OpEvent e = Event(0, "c", "v");
  e.start_unix_ns = kStart - 2500;
  enc.Encode(e, &bytes);
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ops[0].start_ns, -2500);
}

TEST(TraceFormat, EveryTruncationIsRefusedNamingTheOffset) {
  const std::string bytes = Encoded(4);
  // Every cut that is not at an entry boundary must be refused, naming the byte offset.
  absl::StatusOr<Trace> whole = ParseTrace(bytes);
  ASSERT_TRUE(whole.ok());
  int refused = 0;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    absl::StatusOr<Trace> t = ParseTrace(absl::string_view(bytes).substr(0, cut));
    if (t.ok()) continue;  // a cut between entries is a shorter valid trace
    ++refused;
    EXPECT_TRUE(absl::StrContains(t.status().message(), "at byte offset")) << t.status();
    EXPECT_TRUE(absl::StrContains(t.status().message(), "truncated")) << t.status();
  }
  EXPECT_GT(refused, static_cast<int>(bytes.size()) - 12);
  // A cut inside the last record (the fourth, index 3) names it and where it starts.
  absl::StatusOr<Trace> t = ParseTrace(absl::string_view(bytes).substr(0, bytes.size() - 10));
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(),
                                absl::StrCat("at byte offset ", bytes.size() - kRecordBytes,
                                             " (op record 3)")))
      << t.status();
}

TEST(TraceFormat, CorruptFilesAreRefusedSayingWhatIsWrong) {
  const std::string good = Encoded(3);
  auto refused = [](std::string bytes, const std::string& want) {
    absl::StatusOr<Trace> t = ParseTrace(bytes);
    ASSERT_FALSE(t.ok()) << want;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
    EXPECT_TRUE(absl::StrContains(t.status().message(), want)) << t.status();
  };
  std::string b = good;
  b[0] = 'X';
  refused(b, "at byte offset 0: not a gdrstore trace");
  b = good;
  b[8] = 2;
  refused(b, "trace version 2; this build reads version 1");
  b = good;
  b[12] = 40;
  refused(b, "header/record sizes 32/40");
  // The first entry is the volume name's definition at 32; the client's follows.
  b = good;
  b[kHeaderBytes] = 9;
  refused(b, "at byte offset 32 (op record 0): unknown entry tag 9");
  b = good;
  b[kHeaderBytes + 4] = 5;  // volume name id 5 where 0 is due
  refused(b, "at byte offset 32: name id 5 out of order (expected 0)");
  const size_t first_record = kHeaderBytes + (kStringEntryBytes + 4) + (kStringEntryBytes + 19);
  b = good;
  b[first_record + 1] = 7;
  refused(b, absl::StrCat("at byte offset ", first_record, " (op record 0): unknown op kind 7"));
  b = good;
  b[first_record + 4] = 3;  // client 3: never defined
  refused(b, "(op record 0): client id 3 is not defined");
  b = good;
  b[first_record + 8] = 1;  // volume 1: not defined before this record
  refused(b, "(op record 0): volume id 1 is not defined");
}

// Records a reader must refuse before anyone computes with them (issue 29: a length of
// 2^63 + 4096 made replay's slots x length wrap and trace show sum two records to 8192 bytes).
TEST(TraceFormat, RecordsOutOfBoundsAreRefusedNamingTheRecordAndField) {
  struct Case {
    const char* what;
    void (*spoil)(OpEvent*);
    const char* want;
  };
  const Case cases[] = {
      {"length 2^63 + 4096", [](OpEvent* e) { e->length = (uint64_t{1} << 63) + 4096; },
       "(op record 1): length 9223372036854779904 outside 1..140737488355328"},
      {"length 0", [](OpEvent* e) { e->length = 0; }, "(op record 1): length 0 outside"},
      {"length 2^47 + 1", [](OpEvent* e) { e->length = kMaxOpLength + 1; },
       "(op record 1): length 140737488355329 outside"},
      {"offset + length wraps",
       [](OpEvent* e) {
         e->offset = UINT64_MAX - 4095;
         e->length = 8192;
       },
       "(op record 1): offset 18446744073709547520 + length 8192 passes 2^64 - 1"},
      {"latency 2^64 - 1", [](OpEvent* e) { e->latency_ns = UINT64_MAX; },
       "(op record 1): latency 18446744073709551615 ns above"},
      {"start 2^61 after the header",
       [](OpEvent* e) { e->start_unix_ns = kStart + kMaxNs; }, "(op record 1): start"},
      {"start 2^61 before the header",
       [](OpEvent* e) { e->start_unix_ns = kStart - kMaxNs; }, "(op record 1): start"},
  };
  for (const Case& c : cases) {
    std::string bytes = EncodeHeader(kStart);
    TraceEncoder enc(kStart);
    enc.Encode(Event(0, "c", "vol0"), &bytes);
    const size_t second = bytes.size();
    OpEvent bad = Event(1, "c", "vol0");
    c.spoil(&bad);
    enc.Encode(bad, &bytes);
    absl::StatusOr<Trace> t = ParseTrace(bytes);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << c.what;
    EXPECT_TRUE(absl::StrContains(t.status().message(),
                                  absl::StrCat("at byte offset ", second, " ", c.want)))
        << c.what << ": " << t.status();
  }
  // The edges themselves are accepted.
  std::string bytes = EncodeHeader(kStart);
  TraceEncoder enc(kStart);
  OpEvent e = Event(0, "c", "vol0");
  e.length = kMaxOpLength;
  e.offset = UINT64_MAX - kMaxOpLength;
  e.latency_ns = static_cast<uint64_t>(kMaxNs);
  e.start_unix_ns = kStart - kMaxNs + 1;
  enc.Encode(e, &bytes);
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->kind_bytes[0], kMaxOpLength);
}

TEST(TraceFormat, AnUnknownTransportIsRefusedNamingIt) {
  std::string bytes = Encoded(1);
  bytes[bytes.size() - kRecordBytes + 12] = 5;
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown transport 5"), std::string::npos) << t.status();
  EXPECT_STREQ(TransportCodeName(3), "tcp");
  EXPECT_STREQ(TransportCodeName(0), "-");
}

TEST(TraceFormat, ByteTotalsThatWouldWrapAreRefused) {
  // 2^17 gets of 2^47 bytes reach 2^64: the last one is refused, naming it.
  std::string bytes = EncodeHeader(kStart);
  TraceEncoder enc(kStart);
  OpEvent e = Event(0, "c", "vol0");
  e.length = kMaxOpLength;
  const size_t n = size_t{1} << 17;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    last = bytes.size();
    enc.Encode(e, &bytes);
  }
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(
      t.status().message(), absl::StrCat("at byte offset ", last, " (op record ", n - 1,
                                         "): length 140737488355328 takes the trace's get "
                                         "bytes past 2^64 - 1")))
      << t.status();
  // One fewer fits, and the totals are the reader's.
  absl::StatusOr<Trace> fits = ParseTrace(absl::string_view(bytes).substr(0, last));
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->kind_ops[0], n - 1);
  EXPECT_EQ(fits->kind_bytes[0], (n - 1) * kMaxOpLength);
  EXPECT_EQ(fits->kind_ops[1], 0u);
}

// The hostile seeds of the trace fuzz target (tests/fuzz/corpus/trace_file_fuzz/hostile_*,
// written by tests/fuzz/make_seeds.py) are each refused naming an op record.
TEST(TraceFormat, TheFuzzCorpusHostileSeedsAreRefused) {
  const std::string dir = std::string(GDR_SOURCE_DIR) + "/tests/fuzz/corpus/trace_file_fuzz/";
  int seen = 0;
  for (const char* name :
       {"hostile_length_2p63_get", "hostile_length_2p63_put", "hostile_length_zero",
        "hostile_length_over_2p47", "hostile_offset_wraps", "hostile_latency_max",
        "hostile_start_min", "hostile_start_max"}) {
    absl::StatusOr<Trace> t = ReadTraceFile(dir + name);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << name << ": " << t.status();
    EXPECT_TRUE(absl::StrContains(t.status().message(), "(op record 0): ")) << t.status();
    ++seen;
  }
  EXPECT_EQ(seen, 8);
}

TEST(TraceFormat, ReadingAFileNamesIt) {
  const std::string path = TempPath("bad");
  {
    std::ofstream out(path, std::ios::binary);
    out << "GDRTRACX and then some bytes that are long enough";
  }
  absl::StatusOr<Trace> t = ReadTraceFile(path);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), absl::StrCat("trace ", path, ": at byte")))
      << t.status();
  ::unlink(path.c_str());
  EXPECT_FALSE(ReadTraceFile(path).ok());
}

TEST(TraceFileWriter, StopsAtTheCapAndCountsWhatItDrops) {
  const std::string path = TempPath("cap");
  // Room for the header, both names and three records, not a fourth.
  const uint64_t cap = kHeaderBytes + (kStringEntryBytes + 4) + (kStringEntryBytes + 19) +
                       3 * kRecordBytes + kRecordBytes - 1;
  {
    auto w = TraceFileWriter::Create(path, cap, kStart);
    ASSERT_TRUE(w.ok()) << w.status();
    int written = 0;
    for (int i = 0; i < 10; ++i) {
      // Always the same names: a fourth op adds only its record, which does not fit.
      written += (*w)->Append(Event(i, "ipv4:127.0.0.1:4000", "vol0")) ? 1 : 0;
    }
    EXPECT_EQ(written, 3);
    EXPECT_EQ((*w)->records(), 3u);
    EXPECT_EQ((*w)->dropped(), 7u);
    EXPECT_TRUE((*w)->stopped());
    EXPECT_LE((*w)->bytes(), cap);
  }
  const std::string bytes = Slurp(path);
  EXPECT_LE(bytes.size(), cap);
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ops.size(), 3u);
  ::unlink(path.c_str());
}

TEST(TraceFileWriter, RecordingStopsForGoodOnceAnOpDoesNotFit) {
  const std::string path = TempPath("stop");
  const uint64_t cap = kHeaderBytes + (kStringEntryBytes + 1) + (kStringEntryBytes + 1) +
                       kRecordBytes + (kStringEntryBytes + 40) + kRecordBytes - 1;
  auto w = TraceFileWriter::Create(path, cap, kStart);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->Append(Event(0, "c", "v")));
  // A new long client name does not fit; a later op that would fit is dropped all the same, so
  // the file is a prefix of what happened.
  EXPECT_FALSE((*w)->Append(Event(1, std::string(40, 'x'), "v")));
  EXPECT_FALSE((*w)->Append(Event(2, "c", "v")));
  EXPECT_EQ((*w)->dropped(), 2u);
  ASSERT_TRUE((*w)->Flush().ok());
  absl::StatusOr<Trace> t = ParseTrace(Slurp(path));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ops.size(), 1u);
  ::unlink(path.c_str());
}

TEST(TraceFileWriter, ACapWithoutRoomForARecordIsRefused) {
  auto w = TraceFileWriter::Create(TempPath("tiny"), kHeaderBytes + 10, kStart);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(w.status()));
  auto nowhere = TraceFileWriter::Create("/nonexistent-dir/t.trace", 1 << 20, kStart);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_TRUE(absl::StrContains(nowhere.status().message(), "/nonexistent-dir/t.trace"));
}

TEST(TraceFormat, TheShippedCheckpointTraceParses) {
  absl::StatusOr<Trace> t =
      ReadTraceFile(std::string(GDR_SOURCE_DIR) + "/tests/data/checkpoint_load_8ranks.trace");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->clients.size(), 8u);
  EXPECT_EQ(t->volumes, std::vector<std::string>{"ckpt"});
  ASSERT_EQ(t->ops.size(), 256u);
  uint64_t bytes = 0;
  for (const TraceOp& op : t->ops) {
    EXPECT_EQ(op.kind, OpKind::kGet);
    EXPECT_EQ(op.code, 0);
    bytes += op.length;
  }
  EXPECT_EQ(bytes, uint64_t{256} << 20);
}

}  // namespace
}  // namespace gdr::trace
