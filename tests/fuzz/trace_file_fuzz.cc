// Fuzzes the op trace reader (common/wire/trace_format.h), which gdrctl replay and trace show run on
// files from anywhere. Properties: it never crashes; a refusal is INVALID_ARGUMENT naming the
// byte offset; an accepted trace's records name only defined names and hold fields within the
// reader's bounds (lengths, offset + length, start and latency, byte totals: what replay and
// trace show compute with), and encoding its ops again (names spelled out) gives a trace that
// parses to the same ops.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/wire/trace_format.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gdr::trace::Trace> t = gdr::trace::ParseTrace(bytes);
  if (!t.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(t.status()));
    GDR_FUZZ_CHECK(absl::StrContains(t.status().message(), "offset"));
    return 0;
  }
  std::string out = gdr::trace::EncodeHeader(t->start_unix_ns);
  gdr::trace::TraceEncoder encoder(t->start_unix_ns);
  uint64_t kind_bytes[2] = {0, 0};
  for (const gdr::trace::TraceOp& op : t->ops) {
    GDR_FUZZ_CHECK(op.client < t->clients.size() && op.volume < t->volumes.size());
    // Every accepted record is within the reader's bounds, so what readers compute from it
    // (start + latency, offset + length, slots x length, sums) cannot wrap.
    GDR_FUZZ_CHECK(op.length >= 1 && op.length <= gdr::trace::kMaxOpLength);
    GDR_FUZZ_CHECK(op.offset <= UINT64_MAX - op.length);
    GDR_FUZZ_CHECK(op.start_ns > -gdr::trace::kMaxNs && op.start_ns < gdr::trace::kMaxNs);
    GDR_FUZZ_CHECK(op.latency_ns <= static_cast<uint64_t>(gdr::trace::kMaxNs));
    const int k = static_cast<int>(op.kind);
    GDR_FUZZ_CHECK(!__builtin_add_overflow(kind_bytes[k], op.length, &kind_bytes[k]));
    gdr::trace::OpEvent e;
    if (__builtin_add_overflow(t->start_unix_ns, op.start_ns, &e.start_unix_ns)) return 0;
    e.latency_ns = op.latency_ns;
    e.offset = op.offset;
    e.length = op.length;
    e.volume = t->volumes[op.volume];
    e.client = t->clients[op.client];
    e.kind = op.kind;
    e.code = op.code;
    encoder.Encode(e, &out);
  }
  GDR_FUZZ_CHECK(kind_bytes[0] == t->kind_bytes[0] && kind_bytes[1] == t->kind_bytes[1]);
  absl::StatusOr<gdr::trace::Trace> again = gdr::trace::ParseTrace(out);
  GDR_FUZZ_CHECK(again.ok());
  GDR_FUZZ_CHECK(again->ops.size() == t->ops.size());
  for (size_t i = 0; i < t->ops.size(); ++i) {
    const gdr::trace::TraceOp& a = t->ops[i];
    const gdr::trace::TraceOp& b = again->ops[i];
    GDR_FUZZ_CHECK(a.start_ns == b.start_ns && a.latency_ns == b.latency_ns &&
                   a.offset == b.offset && a.length == b.length && a.kind == b.kind &&
                   a.code == b.code);
    GDR_FUZZ_CHECK(t->volumes[a.volume] == again->volumes[b.volume]);
    GDR_FUZZ_CHECK(t->clients[a.client] == again->clients[b.client]);
  }
  return 0;
}
