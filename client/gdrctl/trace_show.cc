#include "client/gdrctl/trace_show.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/wire/trace_format.h"

namespace gdrctl {

int ShowTrace(const std::string& file, uint64_t records, std::ostream& out, std::ostream& err) {
  namespace trace = gdr::trace;
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(file);
  if (!t.ok()) {
    err << "gdrctl: " << t.status().message() << "\n";
    return 1;
  }
  // Per-kind totals come from the reader, which refuses a trace whose sums would wrap.
  const uint64_t* ops = t->kind_ops;
  const uint64_t* bytes = t->kind_bytes;
  uint64_t failed = 0;
  std::vector<uint64_t> per_client(t->clients.size()), per_volume(t->volumes.size());
  int64_t first = 0, last = 0;
  for (size_t i = 0; i < t->ops.size(); ++i) {
    const trace::TraceOp& op = t->ops[i];
    if (op.code != 0) ++failed;
    ++per_client[op.client];
    ++per_volume[op.volume];
    const int64_t end = op.start_ns + static_cast<int64_t>(op.latency_ns);
    first = i == 0 ? op.start_ns : std::min(first, op.start_ns);
    last = i == 0 ? end : std::max(last, end);
  }
  out << absl::StrFormat("trace %s: version %u, started %s\n", file, t->version,
                         absl::FormatTime(absl::FromUnixNanos(t->start_unix_ns),
                                          absl::UTCTimeZone()));
  out << absl::StrFormat("ops: %u (get %u, %u bytes; put %u, %u bytes), %u failed, span %.6f s\n",
                         t->ops.size(), ops[0], bytes[0], ops[1], bytes[1], failed,
                         static_cast<double>(last - first) / 1e9);
  out << "clients (" << t->clients.size() << "):\n";
  for (size_t i = 0; i < t->clients.size(); ++i) {
    out << absl::StrFormat("  %-4u %-40s %u ops\n", i, t->clients[i], per_client[i]);
  }
  out << "volumes (" << t->volumes.size() << "):\n";
  for (size_t i = 0; i < t->volumes.size(); ++i) {
    out << absl::StrFormat("  %-4u %-40s %u ops\n", i, t->volumes[i], per_volume[i]);
  }
  const size_t shown = std::min<size_t>(records, t->ops.size());
  if (shown == 0) return 0;
  out << "first " << shown << " records (in answer order):\n";
  out << absl::StrFormat("  %-6s %12s %-6s %-3s %-12s %12s %10s %-18s %12s %s\n", "#",
                         "start_us", "client", "op", "volume", "offset", "length", "status",
                         "latency_us", "transport");
  for (size_t i = 0; i < shown; ++i) {
    const trace::TraceOp& op = t->ops[i];
    out << absl::StrFormat(
        "  %-6u %12.1f %-6u %-3s %-12s %12u %10u %-18s %12.1f %s\n", i, op.start_ns / 1e3,
        op.client, trace::OpKindName(op.kind), t->volumes[op.volume], op.offset, op.length,
        absl::StatusCodeToString(static_cast<absl::StatusCode>(op.code)), op.latency_ns / 1e3,
        trace::TransportCodeName(op.transport));
  }
  return 0;
}

}  // namespace gdrctl
