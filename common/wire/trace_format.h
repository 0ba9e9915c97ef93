// The op trace file (gdrstored --trace, gdrctl replay / trace show): a versioned little-endian
// binary format of a header, string definitions (volume and client names) and fixed-size op
// records. The layout is specified in docs/simulation.md ("Traces: record and replay").
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::trace {

inline constexpr char kMagic[8] = {'G', 'D', 'R', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 32;
inline constexpr size_t kRecordBytes = 48;
inline constexpr size_t kStringEntryBytes = 8;  // before the name's bytes
inline constexpr size_t kMaxStringBytes = 1024;
inline constexpr uint8_t kTagOp = 1;
inline constexpr uint8_t kTagString = 2;
// What a reader accepts in an op record, checked before any arithmetic on the fields, so that
// every reader (replay sizing its buffers, trace show summing bytes, spans from start + latency)
// may add and multiply them without wrapping. No daemon answers an op outside these:
// - length 1..kMaxOpLength: 2^47 bytes (128 TiB) is the whole user address space of x86-64
//   and arm64 with 4-level page tables, so no client buffer could hold more; a daemon refuses
//   length 0.
// - offset + length at most 2^64 - 1 (an extent that does not wrap).
// - start within +-kMaxNs of the header's start and latency at most kMaxNs: 2^61 ns is 73
//   years, and with both bounded, start + latency, and the span of any two ops, fit an int64.
inline constexpr uint64_t kMaxOpLength = uint64_t{1} << 47;
inline constexpr int64_t kMaxNs = int64_t{1} << 61;
// The largest file ReadTraceFile reads (the whole file is held in memory while parsing).
inline constexpr uint64_t kMaxFileBytes = uint64_t{64} << 30;

// "get": store -> the caller's buffer (the Write RPC); "put": the caller's buffer -> store.
enum class OpKind : uint8_t { kGet = 0, kPut = 1 };
enum class StringTable : uint8_t { kVolume = 1, kClient = 2 };

const char* OpKindName(OpKind kind);

// The transport that moved an op (record byte 12; gdrstore.v1.Transport's numbers). Traces
// written before it was recorded carry 0 there.
inline constexpr uint8_t kMaxTransport = 4;
// "dc", "rc", "tcp", "local"; "-" for 0 (not recorded).
const char* TransportCodeName(uint8_t transport);

// One op as the daemon saw it, with its names spelled out (what the recorder is handed).
struct OpEvent {
  int64_t start_unix_ns = 0;  // when the op was admitted
  uint64_t latency_ns = 0;    // admitted -> answered
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string volume;
  std::string client;  // the call's gRPC peer ("ipv4:127.0.0.1:40312")
  OpKind kind = OpKind::kGet;
  uint16_t code = 0;  // absl::StatusCode of the answer
  uint8_t transport = 0;  // gdrstore.v1.Transport of the op's endpoint
};

// One op of a parsed trace; `client` and `volume` index Trace::clients / Trace::volumes.
struct TraceOp {
  int64_t start_ns = 0;  // since Trace::start_unix_ns (negative: begun before a reopen)
  uint64_t latency_ns = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t client = 0;
  uint32_t volume = 0;
  OpKind kind = OpKind::kGet;
  uint16_t code = 0;
  uint8_t transport = 0;  // 0 (not recorded) or 1..kMaxTransport
};

struct Trace {
  uint16_t version = kVersion;
  int64_t start_unix_ns = 0;
  std::vector<std::string> volumes;
  std::vector<std::string> clients;
  std::vector<TraceOp> ops;  // in file order: the order ops were answered
  // Ops and bytes per kind (indexed by OpKind), summed by the reader, which refuses a trace
  // whose byte total would pass 2^64 - 1.
  uint64_t kind_ops[2] = {0, 0};
  uint64_t kind_bytes[2] = {0, 0};
};

// The 32-byte header of a trace that starts at `start_unix_ns`.
std::string EncodeHeader(int64_t start_unix_ns);

// Turns OpEvents into the bytes that follow a header: each name is defined (once, ids dense per
// table from 0) before the first record that uses it. Not thread-safe.
class TraceEncoder {
 public:
  explicit TraceEncoder(int64_t start_unix_ns) : start_unix_ns_(start_unix_ns) {}
  // Appends the op's record, after the definitions of names not defined yet, to `out`.
  // Names longer than kMaxStringBytes are cut to that length.
  void Encode(const OpEvent& e, std::string* out);

 private:
  uint32_t Intern(StringTable table, absl::string_view name, std::string* out);
  int64_t start_unix_ns_;
  absl::flat_hash_map<std::string, uint32_t> volumes_;
  absl::flat_hash_map<std::string, uint32_t> clients_;
};

// Parses a whole trace. INVALID_ARGUMENT naming the byte offset (and the op record's index)
// where the bytes stop making sense: bad magic, a version this build does not read, a
// truncated header or entry, an unknown tag, a name id out of order, a record naming an
// undefined name or an unknown kind, a record field outside the bounds above (naming the
// field), a byte total past 2^64 - 1.
absl::StatusOr<Trace> ParseTrace(absl::string_view bytes);
// The same for a file; NOT_FOUND / the errno's status when it cannot be read,
// INVALID_ARGUMENT when it is not a regular file or is larger than kMaxFileBytes, and every
// error names the file.
absl::StatusOr<Trace> ReadTraceFile(const std::string& path);

// Writes a trace file of at most `max_bytes`: header at Create, then op by op. Once an op (its
// new names and its record) would pass the cap, recording stops: that op and every later one
// is dropped and counted, so the file stays a valid trace no larger than the cap. Not
// thread-safe; owns the file.
class TraceFileWriter {
 public:
  // Creates (truncates) `path` and writes the header. INVALID_ARGUMENT when `max_bytes` cannot
  // hold the header and one record; the errno's status naming the path when it cannot be
  // opened or written.
  static absl::StatusOr<std::unique_ptr<TraceFileWriter>> Create(const std::string& path,
                                                                 uint64_t max_bytes,
                                                                 int64_t start_unix_ns);
  ~TraceFileWriter();  // flushes and closes
  TraceFileWriter(const TraceFileWriter&) = delete;
  TraceFileWriter& operator=(const TraceFileWriter&) = delete;

  // False when the op was dropped (cap reached or a write failed; see error()).
  bool Append(const OpEvent& e);
  // Pushes buffered bytes to the kernel; the first write error, also kept in error().
  absl::Status Flush();

  uint64_t bytes() const { return bytes_; }  // file size once flushed
  uint64_t records() const { return records_; }
  uint64_t dropped() const { return dropped_; }
  bool stopped() const { return stopped_; }  // the cap was reached
  const absl::Status& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  TraceFileWriter(std::string path, std::FILE* f, uint64_t max_bytes, int64_t start_unix_ns);
  std::string path_;
  std::FILE* file_;
  uint64_t max_bytes_;
  TraceEncoder encoder_;
  std::string scratch_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
  uint64_t dropped_ = 0;
  bool stopped_ = false;
  absl::Status error_;
};

}  // namespace gdr::trace
