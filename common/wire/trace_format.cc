#include "common/wire/trace_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace gdr::trace {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
}

template <typename T>
T Get(const char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return static_cast<T>(v);
}

absl::Status Bad(size_t offset, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("at byte offset ", offset, ": ", what));
}

absl::Status BadRecord(size_t offset, size_t record, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("at byte offset ", offset, " (op record ", record, "): ", what));
}

}  // namespace

const char* TransportCodeName(uint8_t transport) {
  switch (transport) {
    case 1:
      return "dc";
    case 2:
      return "rc";
    case 3:
      return "tcp";
    case 4:
      return "local";
  }
  return "-";
}

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kGet:
      return "get";
    case OpKind::kPut:
      return "put";
  }
  return "?";
}

std::string EncodeHeader(int64_t start_unix_ns) {
  std::string h(kMagic, sizeof(kMagic));
  Put<uint16_t>(&h, kVersion);
  Put<uint16_t>(&h, kHeaderBytes);
  Put<uint16_t>(&h, kRecordBytes);
  Put<uint16_t>(&h, 0);
  Put<int64_t>(&h, start_unix_ns);
  Put<uint64_t>(&h, 0);
  return h;
}

uint32_t TraceEncoder::Intern(StringTable table, absl::string_view name, std::string* out) {
  if (name.size() > kMaxStringBytes) name = name.substr(0, kMaxStringBytes);
  auto& ids = table == StringTable::kVolume ? volumes_ : clients_;
  auto [it, added] = ids.try_emplace(std::string(name), static_cast<uint32_t>(ids.size()));
  if (added) {
    Put<uint8_t>(out, kTagString);
    Put<uint8_t>(out, static_cast<uint8_t>(table));
    Put<uint16_t>(out, static_cast<uint16_t>(name.size()));
    Put<uint32_t>(out, it->second);
    out->append(name.data(), name.size());
  }
  return it->second;
}

void TraceEncoder::Encode(const OpEvent& e, std::string* out) {
  const uint32_t volume = Intern(StringTable::kVolume, e.volume, out);
  const uint32_t client = Intern(StringTable::kClient, e.client, out);
  Put<uint8_t>(out, kTagOp);
  Put<uint8_t>(out, static_cast<uint8_t>(e.kind));
  Put<uint16_t>(out, e.code);
  Put<uint32_t>(out, client);
  Put<uint32_t>(out, volume);
  Put<uint8_t>(out, e.transport);
  Put<uint8_t>(out, 0);
  Put<uint16_t>(out, 0);
  Put<int64_t>(out, e.start_unix_ns - start_unix_ns_);
  Put<uint64_t>(out, e.offset);
  Put<uint64_t>(out, e.length);
  Put<uint64_t>(out, e.latency_ns);
}

absl::StatusOr<Trace> ParseTrace(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return Bad(bytes.size(), absl::StrCat("truncated header (", bytes.size(), " of ",
                                          kHeaderBytes, " bytes)"));
  }
  const char* p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    return Bad(0, "not a gdrstore trace (magic is not GDRTRACE)");
  }
  Trace t;
  t.version = Get<uint16_t>(p + 8);
  if (t.version != kVersion) {
    return Bad(8, absl::StrCat("trace version ", t.version, "; this build reads version ",
                               kVersion));
  }
  const uint16_t header = Get<uint16_t>(p + 10);
  const uint16_t record = Get<uint16_t>(p + 12);
  if (header != kHeaderBytes || record != kRecordBytes) {
    return Bad(10, absl::StrCat("header/record sizes ", header, "/", record, ", expected ",
                                kHeaderBytes, "/", kRecordBytes));
  }
  t.start_unix_ns = Get<int64_t>(p + 16);
  size_t at = kHeaderBytes;
  while (at < bytes.size()) {
    const size_t left = bytes.size() - at;
    const uint8_t tag = static_cast<uint8_t>(p[at]);
    if (tag == kTagString) {
      if (left < kStringEntryBytes) return Bad(at, "truncated name definition");
      const uint8_t table = static_cast<uint8_t>(p[at + 1]);
      const uint16_t len = Get<uint16_t>(p + at + 2);
      const uint32_t id = Get<uint32_t>(p + at + 4);
      std::vector<std::string>* names = table == static_cast<uint8_t>(StringTable::kVolume)
                                            ? &t.volumes
                                        : table == static_cast<uint8_t>(StringTable::kClient)
                                            ? &t.clients
                                            : nullptr;
      if (names == nullptr) return Bad(at, absl::StrCat("unknown name table ", table));
      if (len == 0 || len > kMaxStringBytes) {
        return Bad(at, absl::StrCat("name length ", len, " outside 1..", kMaxStringBytes));
      }
      if (id != names->size()) {
        return Bad(at, absl::StrCat("name id ", id, " out of order (expected ", names->size(),
                                    ")"));
      }
      if (left < kStringEntryBytes + len) return Bad(at, "truncated name definition");
      names->emplace_back(p + at + kStringEntryBytes, len);
      at += kStringEntryBytes + len;
      continue;
    }
    const size_t index = t.ops.size();
    if (tag != kTagOp) return BadRecord(at, index, absl::StrCat("unknown entry tag ", tag));
    if (left < kRecordBytes) {
      return BadRecord(at, index, absl::StrCat("truncated record (", left, " of ", kRecordBytes,
                                               " bytes)"));
    }
    const char* r = p + at;
    TraceOp op;
    const uint8_t kind = static_cast<uint8_t>(r[1]);
    if (kind > static_cast<uint8_t>(OpKind::kPut)) {
      return BadRecord(at, index, absl::StrCat("unknown op kind ", kind));
    }
    op.kind = static_cast<OpKind>(kind);
    op.code = Get<uint16_t>(r + 2);
    op.client = Get<uint32_t>(r + 4);
    op.volume = Get<uint32_t>(r + 8);
    op.transport = static_cast<uint8_t>(r[12]);
    if (op.transport > kMaxTransport) {
      return BadRecord(at, index, absl::StrCat("unknown transport ", static_cast<int>(op.transport)));
    }
    op.start_ns = Get<int64_t>(r + 16);
    op.offset = Get<uint64_t>(r + 24);
    op.length = Get<uint64_t>(r + 32);
    op.latency_ns = Get<uint64_t>(r + 40);
    if (op.client >= t.clients.size()) {
      return BadRecord(at, index, absl::StrCat("client id ", op.client, " is not defined"));
    }
    if (op.volume >= t.volumes.size()) {
      return BadRecord(at, index, absl::StrCat("volume id ", op.volume, " is not defined"));
    }
    // Bounded here, before anyone multiplies or adds them (trace_format.h says why these).
    if (op.length == 0 || op.length > kMaxOpLength) {
      return BadRecord(at, index, absl::StrCat("length ", op.length, " outside 1..",
                                               kMaxOpLength, " (2^47)"));
    }
    if (op.offset > UINT64_MAX - op.length) {
      return BadRecord(at, index, absl::StrCat("offset ", op.offset, " + length ", op.length,
                                               " passes 2^64 - 1"));
    }
    if (op.start_ns <= -kMaxNs || op.start_ns >= kMaxNs) {
      return BadRecord(at, index, absl::StrCat("start ", op.start_ns, " ns outside +-", kMaxNs,
                                               " (2^61) ns of the header's start"));
    }
    if (op.latency_ns > static_cast<uint64_t>(kMaxNs)) {
      return BadRecord(at, index, absl::StrCat("latency ", op.latency_ns, " ns above ", kMaxNs,
                                               " (2^61) ns"));
    }
    const int k = static_cast<int>(op.kind);
    if (__builtin_add_overflow(t.kind_bytes[k], op.length, &t.kind_bytes[k])) {
      return BadRecord(at, index, absl::StrCat("length ", op.length, " takes the trace's ",
                                               OpKindName(op.kind), " bytes past 2^64 - 1"));
    }
    ++t.kind_ops[k];
    t.ops.push_back(op);
    at += kRecordBytes;
  }
  return t;
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("trace ", path, ": cannot open"));
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("trace ", path, ": ", st.st_size,
                                                   " bytes, above the ", kMaxFileBytes,
                                                   " bytes a reader holds in memory"));
  }
  // Read in pieces with the cap checked as it grows, so a pipe or a file that grows while it
  // is read cannot take more than the cap either.
  std::string bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  char piece[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, piece, sizeof(piece));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("trace ", path, ": cannot read"));
    }
    if (bytes.size() + static_cast<size_t>(n) > kMaxFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace ", path, ": more than the ", kMaxFileBytes, " bytes a reader holds in memory"));
    }
    bytes.append(piece, static_cast<size_t>(n));
  }
  absl::StatusOr<Trace> t = ParseTrace(bytes);
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat("trace ", path, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<TraceFileWriter>> TraceFileWriter::Create(const std::string& path,
                                                                         uint64_t max_bytes,
                                                                         int64_t start_unix_ns) {
  if (max_bytes < kHeaderBytes + kRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat("trace size cap ", max_bytes,
                                                   " bytes holds no record (at least ",
                                                   kHeaderBytes + kRecordBytes, ")"));
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("trace ", path, ": cannot create"));
  }
  std::unique_ptr<TraceFileWriter> w(new TraceFileWriter(path, f, max_bytes, start_unix_ns));
  const std::string header = EncodeHeader(start_unix_ns);
  // Flushed at once: a trace file is a valid (empty) trace from the moment it exists.
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size() || std::fflush(f) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("trace ", path, ": cannot write"));
  }
  w->bytes_ = header.size();
  return w;
}

TraceFileWriter::TraceFileWriter(std::string path, std::FILE* f, uint64_t max_bytes,
                                 int64_t start_unix_ns)
    : path_(std::move(path)), file_(f), max_bytes_(max_bytes), encoder_(start_unix_ns) {}

TraceFileWriter::~TraceFileWriter() {
  Flush().IgnoreError();
  std::fclose(file_);
}

bool TraceFileWriter::Append(const OpEvent& e) {
  if (stopped_ || !error_.ok()) {
    ++dropped_;
    return false;
  }
  // Encoded before the check: a name defined by an op that does not fit is defined again by
  // nobody (recording has stopped), so the encoder's state may run ahead of the file.
  scratch_.clear();
  encoder_.Encode(e, &scratch_);
  if (bytes_ + scratch_.size() > max_bytes_) {
    stopped_ = true;
    ++dropped_;
    return false;
  }
  if (std::fwrite(scratch_.data(), 1, scratch_.size(), file_) != scratch_.size()) {
    error_ = absl::ErrnoToStatus(errno, absl::StrCat("trace ", path_, ": write failed"));
    ++dropped_;
    return false;
  }
  bytes_ += scratch_.size();
  ++records_;
  return true;
}

absl::Status TraceFileWriter::Flush() {
  if (error_.ok() && std::fflush(file_) != 0) {
    error_ = absl::ErrnoToStatus(errno, absl::StrCat("trace ", path_, ": flush failed"));
  }
  return error_;
}

}  // namespace gdr::trace
