#include "bench/scale_client.h"

#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/monotonic_ns.h"
#include "client/gdrctl/bench.h"

namespace gdrbench {
namespace {

// A failure message is cut here, so a report line always fits in one atomic pipe write.
constexpr size_t kMaxMessage = 1024;
static_assert(kMaxMessage + 128 < PIPE_BUF);

template <typename T>
bool ParseNumber(const std::map<std::string, std::string>& kv, const std::string& key, T* out) {
  auto it = kv.find(key);
  return it != kv.end() && absl::SimpleAtoi(it->second, out);
}

// Sends one report line; a parent that went away ends this process (nobody would read it).
void Report(const ClientReport& r) {
  const std::string line = FormatReport(r);
  if (!WriteToPipe(kReportFd, line).ok()) ::_exit(1);
}

int ReportFailure(uint32_t index, const absl::Status& st) {
  ClientReport r;
  r.kind = ClientReport::Kind::kFailed;
  r.index = index;
  r.pid = ::getpid();
  r.code = absl::StatusCodeToString(st.code());
  r.message = std::string(st.message());
  Report(r);
  return 1;
}

}  // namespace

std::vector<std::string> ScaleClientArgs::ToFlags() const {
  std::vector<std::string> f = {
      absl::StrCat("--daemon=", daemon_address),
      absl::StrCat("--index=", index),
      absl::StrCat("--parent=", parent),
      absl::StrCat("--kind=", kind == gdrstore::OpKind::kWrite ? "write" : "read"),
      absl::StrCat("--size=", size),
      absl::StrCat("--ops=", ops),
      absl::StrCat("--qd=", qd),
      absl::StrCat("--offset=", offset),
      absl::StrCat("--gpu-slot=", gpu_slot),
      absl::StrCat("--stream-calls=", stream_calls)};
  if (!gpu.empty()) f.push_back(absl::StrCat("--gpu=", gpu));
  return f;
}

absl::StatusOr<ScaleClientArgs> ScaleClientArgs::FromFlags(const std::vector<std::string>& flags) {
  std::map<std::string, std::string> kv;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    if (f.rfind("--", 0) != 0 || eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("client flag '", f, "' is not --key=value"));
    }
    kv[f.substr(2, eq - 2)] = f.substr(eq + 1);
  }
  ScaleClientArgs a;
  auto bad = [](const char* key) {
    return absl::InvalidArgumentError(absl::StrCat("client flag --", key, " is missing or bad"));
  };
  if (kv["daemon"].empty()) return bad("daemon");
  a.daemon_address = kv["daemon"];
  if (!ParseNumber(kv, "index", &a.index)) return bad("index");
  if (!ParseNumber(kv, "parent", &a.parent) || a.parent <= 1) return bad("parent");
  if (kv["kind"] == "write") {
    a.kind = gdrstore::OpKind::kWrite;
  } else if (kv["kind"] == "read") {
    a.kind = gdrstore::OpKind::kRead;
  } else {
    return bad("kind");
  }
  if (!ParseNumber(kv, "size", &a.size) || a.size == 0) return bad("size");
  if (!ParseNumber(kv, "ops", &a.ops) || a.ops == 0) return bad("ops");
  if (!ParseNumber(kv, "qd", &a.qd) || a.qd == 0) return bad("qd");
  if (!ParseNumber(kv, "offset", &a.offset)) return bad("offset");
  if (!ParseNumber(kv, "gpu-slot", &a.gpu_slot) || a.gpu_slot == 0) return bad("gpu-slot");
  if (!ParseNumber(kv, "stream-calls", &a.stream_calls) ||
      a.stream_calls > gdrstore::kMaxStreamCalls) {
    return bad("stream-calls");
  }
  a.gpu = kv["gpu"];
  return a;
}

std::string FormatReport(const ClientReport& r) {
  switch (r.kind) {
    case ClientReport::Kind::kReady:
      return absl::StrCat("ready ", r.index, " ", r.pid, "\n");
    case ClientReport::Kind::kDone:
      return absl::StrCat("done ", r.index, " ", r.pid, " ", r.bytes, " ", r.ops, " ", r.start_ns,
                          " ", r.end_ns, " ", r.links, " ", r.gpu_copy_ns, " ", r.gpu_wait_ns, "\n");
    case ClientReport::Kind::kFailed: {
      std::string msg = r.message.substr(0, kMaxMessage);
      for (char& c : msg)
        if (c == '\n' || c == '\r') c = ' ';
      return absl::StrCat("failed ", r.index, " ", r.pid, " ", r.code.empty() ? "UNKNOWN" : r.code,
                          " ", msg, "\n");
    }
  }
  return "";
}

absl::StatusOr<ClientReport> ParseReport(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 4));
  ClientReport r;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("bad client report '", line, "'"));
  };
  if (f.size() < 3 || !absl::SimpleAtoi(f[1], &r.index) || !absl::SimpleAtoi(f[2], &r.pid)) {
    return bad();
  }
  if (f[0] == "ready" && f.size() == 3) {
    r.kind = ClientReport::Kind::kReady;
    return r;
  }
  if (f[0] == "failed" && f.size() >= 4) {
    r.kind = ClientReport::Kind::kFailed;
    r.code = std::string(f[3]);
    if (f.size() == 5) r.message = std::string(f[4]);
    return r;
  }
  std::vector<absl::string_view> n = absl::StrSplit(line, ' ');
  if (f[0] == "done" && n.size() == 10) {
    if (!absl::SimpleAtoi(n[3], &r.bytes) || !absl::SimpleAtoi(n[4], &r.ops) ||
        !absl::SimpleAtoi(n[5], &r.start_ns) || !absl::SimpleAtoi(n[6], &r.end_ns) ||
        !absl::SimpleAtoi(n[7], &r.links) || !absl::SimpleAtoi(n[8], &r.gpu_copy_ns) ||
        !absl::SimpleAtoi(n[9], &r.gpu_wait_ns)) {
      return bad();
    }
    r.kind = ClientReport::Kind::kDone;
    return r;
  }
  return bad();
}

absl::Status WriteToPipe(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "write to pipe");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

int RunScaleClient(int argc, char** argv) {
  std::vector<std::string> flags(argv + 2, argv + argc);
  absl::StatusOr<ScaleClientArgs> parsed = ScaleClientArgs::FromFlags(flags);
  if (!parsed.ok()) {
    std::fprintf(stderr, "gdr_bench %s: %s\n", kScaleClientFlag,
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  const ScaleClientArgs& a = *parsed;
  // A parent that dies (or is killed) takes its clients with it instead of leaving them behind.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.parent) return 1;

  gdrstore::ClientOptions o;
  o.daemon_address = a.daemon_address;
  o.gpu_staging_slot_bytes = a.gpu_slot;
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = gdrstore::Client::Connect(o);
  if (!client.ok()) return ReportFailure(a.index, client.status());
  const uint64_t bytes = uint64_t{a.qd} * a.size;
  absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> buffer =
      a.gpu.empty() ? (*client)->AllocateBuffer(bytes) : (*client)->AllocateGpuBuffer(a.gpu, bytes);
  if (!buffer.ok()) return ReportFailure(a.index, buffer.status());
  if (!(*buffer)->on_gpu()) std::memset((*buffer)->data(), 0, bytes);  // fault the pages in now

  ClientReport ready;
  ready.kind = ClientReport::Kind::kReady;
  ready.index = a.index;
  ready.pid = ::getpid();
  Report(ready);
  char go = 0;
  ssize_t n;
  do {
    n = ::read(kStartFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return 1;  // the parent closed the pipe without starting us: nothing to run

  gdrctl::BenchOptions b;
  b.kind = a.kind;
  b.volume = "vol0";
  b.offset = a.offset;
  b.size = a.size;
  b.span = bytes;  // each slot its own extent, inside this client's own range
  b.iterations = a.ops;
  b.qd = a.qd;
  b.stream_calls = a.stream_calls;
  b.buffer = buffer->get();
  const gdrstore::TargetStats before = (*client)->transport_info().target;
  const int64_t start = MonotonicNs();
  absl::StatusOr<gdrctl::BenchResult> r = gdrctl::RunBench(**client, b);
  const int64_t end = MonotonicNs();
  // Read at once: links past the client's share close a few seconds after they go idle.
  const gdrstore::TargetStats after = (*client)->transport_info().target;
  if (!r.ok()) return ReportFailure(a.index, r.status());
  const uint32_t links = after.links;
  ClientReport done;
  done.kind = ClientReport::Kind::kDone;
  done.index = a.index;
  done.pid = ::getpid();
  done.bytes = r->bytes;
  done.ops = r->ops;
  done.start_ns = start;
  done.end_ns = end;
  done.links = links;
  done.gpu_copy_ns = after.gpu_copy_ns - before.gpu_copy_ns;
  done.gpu_wait_ns = after.gpu_wait_ns - before.gpu_wait_ns;
  Report(done);
  return 0;
}

}  // namespace gdrbench
