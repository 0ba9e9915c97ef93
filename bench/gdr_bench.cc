// gdr_bench: one self-contained benchmark run. Starts a real gdrstored child on loopback,
// measures the tcp transport and the RPC paths through libgdrclient, and prints each number
// beside a baseline measured in the same run (raw loopback TCP, an empty Ping RPC, unary RPCs)
// with the ratio and the aim it is held to. docs/benchmarks.md explains every line.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "bench/bare_grpc.h"
#include "bench/bench_flags.h"
#include "bench/bench_report.h"
#include "bench/chained_calls.h"
#include "bench/daemon_process.h"
#include "bench/raw_tcp.h"
#include "bench/report_text.h"
#include "bench/scale.h"
#include "bench/scale_client.h"
#include "client/gdrctl/bench.h"
#include "common/base/json.h"
#include "common/base/units.h"
#include "common/cuda/gpu.h"
#include "common/base/status_macros.h"
#include "gdrstore/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using gdrbench::MachineCpu;
using gdrbench::PrintJson;
using gdrbench::PrintTable;
using gdrbench::Row;
using gdrbench::Median;
using gdrbench::TouchedMemory;

constexpr uint64_t kMiB = 1 << 20;

using gdrbench::Settings;

double Percentile(std::vector<uint64_t> ns, double p) {
  std::sort(ns.begin(), ns.end());
  const size_t idx = static_cast<size_t>(p * static_cast<double>(ns.size() - 1) + 0.5);
  return static_cast<double>(ns[idx]) / 1e3;
}

// ---- baselines ----

// `ops` empty Ping RPCs back to back over the callback API, the next issued from the previous
// one's completion, exactly as RunBench chains unary ops at qd 1. Returns per-call latency, ns.
absl::StatusOr<std::vector<uint64_t>> PingLoop(gdrstore::Client& client, uint64_t ops) {
  // The library's Ping carries a 10 s deadline.
  return gdrbench::ChainedCalls(
      ops, [&](std::function<void(absl::Status)> done) { client.Ping(std::move(done)); });
}

// ---- the run ----

class Bench {
 public:
  Bench(const Settings& s, gdrstore::Client& client) : s_(s), client_(client) {}

  absl::Status Run(std::vector<Row>* rows) {
    if (s_.Wants("bw")) GDR_RETURN_IF_ERROR(Bandwidth(rows));
    if (s_.Wants("lat")) GDR_RETURN_IF_ERROR(Latency(rows));
    if (s_.Wants("rate")) GDR_RETURN_IF_ERROR(Rate(rows));
    if (s_.Wants("gpu")) GDR_RETURN_IF_ERROR(Gpu(rows));
    if (s_.Wants("reg")) GDR_RETURN_IF_ERROR(Registration(rows));
    return absl::OkStatus();
  }

  // (e) Registering memory the caller owns: the same range again (a registration cache hit)
  // against the first registration of it, for 1 GiB of host memory and, with --gpu, of device
  // memory. Each repeat registers fresh memory.
  absl::Status Registration(std::vector<Row>* rows) {
    constexpr size_t kBytes = size_t{1} << 30;
    using Us = std::chrono::duration<double, std::micro>;
    // One row: `call` ("RegisterHostMemory") registering the same range twice per repeat.
    auto time_twice = [&](const std::string& call, auto register_once) -> absl::Status {
      Row row;
      row.name = absl::StrCat(call, " 1 GiB again");
      row.unit = "us";
      row.baseline = absl::StrCat(call, " 1 GiB first");
      row.aim = "<= 0.05";
      row.aim_ratio = 0.05;
      row.higher_is_better = false;
      Progress(row.name);
      for (int r = -s_.warmup; r < s_.repeats; ++r) {
        const Clock::time_point t0 = Clock::now();
        GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> first, register_once());
        const Clock::time_point t1 = Clock::now();
        GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> again, register_once());
        const Clock::time_point t2 = Clock::now();
        if (again->rkey() != first->rkey()) {
          return absl::InternalError("the repeated registration was not the cached one");
        }
        if (r < 0) continue;
        row.product.push_back(Us(t2 - t1).count());
        row.base.push_back(Us(t1 - t0).count());
      }
      rows->push_back(std::move(row));
      return absl::OkStatus();
    };
    {
      TouchedMemory host(kBytes);
      if (host.data() == nullptr) return absl::ResourceExhaustedError("1 GiB host buffer");
      GDR_RETURN_IF_ERROR(time_twice("RegisterHostMemory", [&] {
        return client_.RegisterHostMemory(host.data(), kBytes);
      }));
    }
    if (s_.gpu.empty()) return absl::OkStatus();
    GDR_ASSIGN_OR_RETURN(gdr::cuda::GpuInfo gpu, gdr::cuda::FindGpu(s_.gpu));
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdr::cuda::DeviceMemory> dev,
                         gdr::cuda::DeviceMemory::Create(gpu.ordinal, kBytes));
    return time_twice("RegisterGpuMemory",
                      [&] { return client_.RegisterGpuMemory(dev->ptr(), kBytes); });
  }

  // (d) tcp Writes into GPU memory (staged through pinned memory by the client's tcp target)
  // vs cuMemcpyHtoD from pinned memory, vs the same Writes into host memory, and the share of
  // the wall time the staging copies kept the GPU's copy engine busy.
  absl::Status Gpu(std::vector<Row>* rows) {
    GDR_ASSIGN_OR_RETURN(gdr::cuda::GpuInfo gpu, gdr::cuda::FindGpu(s_.gpu));
    const uint32_t max_qd = *std::max_element(s_.bw_qds.begin(), s_.bw_qds.end());
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> gbuf,
                         client_.AllocateGpuBuffer(gpu.pci, max_qd * s_.bw_size));
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> hbuf,
                         client_.AllocateBuffer(max_qd * s_.bw_size));
    std::memset(hbuf->data(), 0, hbuf->size());
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdr::cuda::DeviceMemory> dev,
                         gdr::cuda::DeviceMemory::Create(gpu.ordinal, s_.bw_size));
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdr::cuda::PinnedMemory> pinned,
                         gdr::cuda::PinnedMemory::Create(s_.bw_size));
    std::memset(pinned->data(), 0x5a, s_.bw_size);
    TouchedMemory pageable(s_.bw_size);
    if (pageable.data() == nullptr) return absl::ResourceExhaustedError("pageable buffer");
    auto h2d = [&](const void* src) -> absl::StatusOr<double> {
      const Clock::time_point t0 = Clock::now();
      for (uint64_t i = 0; i < s_.gpu_copies; ++i) {
        GDR_RETURN_IF_ERROR(dev->CopyFromHost(0, src, s_.bw_size));
      }
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      return static_cast<double>(s_.bw_size * s_.gpu_copies) / secs / 1e9;
    };
    const std::string size = gdr::FormatSize(s_.bw_size);
    if (!s_.json) {
      std::fprintf(stderr, "  GPU %d %s %s\n", gpu.ordinal, gpu.pci.c_str(), gpu.name.c_str());
    }
    {
      Row row = gdrbench::InfoRow(absl::StrCat("pinned cuMemcpyHtoD ", size), "GB/s",
                                  absl::StrCat("pageable cuMemcpyHtoD ", size));
      Progress(row.name);
      for (int r = -s_.warmup; r < s_.repeats; ++r) {
        GDR_ASSIGN_OR_RETURN(double pin, h2d(pinned->data()));
        GDR_ASSIGN_OR_RETURN(double page, h2d(pageable.data()));
        if (r < 0) continue;
        row.product.push_back(pin);
        row.base.push_back(page);
      }
      rows->push_back(std::move(row));
    }
    for (uint32_t qd : s_.bw_qds) {
      Row vs_pinned = gdrbench::InfoRow(absl::StrCat("tcp Write ", size, " into GPU qd", qd),
                                        "GB/s", absl::StrCat("pinned cuMemcpyHtoD ", size));
      Row vs_host, share;
      vs_host.name = vs_pinned.name;
      vs_host.unit = "GB/s";
      vs_host.baseline = absl::StrCat("tcp Write ", size, " into host qd", qd);
      vs_host.aim = ">= 0.85";
      vs_host.aim_ratio = 0.85;
      share.name = absl::StrCat("GPU copy time, tcp Write into GPU qd", qd);
      share.unit = "%";
      share.baseline = "wall time of the same Writes";
      share.aim = "<= 0.20";
      share.aim_ratio = 0.20;
      share.higher_is_better = false;
      Progress(vs_pinned.name);
      for (int r = -s_.warmup; r < s_.repeats; ++r) {
        GDR_ASSIGN_OR_RETURN(double pin, h2d(pinned->data()));
        GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult host,
                             Ops(gdrstore::OpKind::kWrite, s_.bw_size, 0, s_.bw_ops, qd, false,
                                 hbuf.get()));
        const gdrstore::TargetStats before = client_.transport_info().target;
        GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult dev_res,
                             Ops(gdrstore::OpKind::kWrite, s_.bw_size, 0, s_.bw_ops, qd, false,
                                 gbuf.get()));
        const gdrstore::TargetStats after = client_.transport_info().target;
        if (after.gpu_bytes_to_device - before.gpu_bytes_to_device < s_.bw_size * s_.bw_ops) {
          return absl::InternalError("the Writes into GPU memory did not go through staging");
        }
        if (r < 0) continue;
        vs_pinned.product.push_back(dev_res.gbps);
        vs_pinned.base.push_back(pin);
        vs_host.product.push_back(dev_res.gbps);
        vs_host.base.push_back(host.gbps);
        share.product.push_back(100.0 * static_cast<double>(after.gpu_copy_ns - before.gpu_copy_ns) /
                                (dev_res.seconds * 1e9));
        share.base.push_back(100.0);
      }
      rows->push_back(std::move(vs_pinned));
      rows->push_back(std::move(vs_host));
      rows->push_back(std::move(share));
    }
    return absl::OkStatus();
  }

 private:
  void Progress(const std::string& what) {
    if (!s_.json) std::fprintf(stderr, "  ... %s\n", what.c_str());
  }

  absl::StatusOr<gdrctl::BenchResult> Ops(gdrstore::OpKind kind, uint64_t size, uint64_t offset,
                                          uint64_t iterations, uint32_t qd, bool unary,
                                          const gdrstore::Buffer* buffer,
                                          uint32_t stream_batch = 0,
                                          uint32_t stream_calls = 0) {
    gdrctl::BenchOptions o;
    o.kind = kind;
    o.volume = "vol0";
    o.offset = offset;
    o.size = size;
    o.span = size * qd;  // each slot its own extent: concurrent ops never overlap in the store
    o.iterations = iterations;
    o.qd = qd;
    o.unary = unary;
    o.buffer = buffer;
    o.stream_batch = stream_batch;
    o.stream_calls = stream_calls;
    return gdrctl::RunBench(client_, o);
  }

  // (a) 64 MiB Write/Read over the Stream RPC at each qd vs raw loopback TCP of the same bytes
  // over as many connections as the client had links at the end of that measurement (a lone
  // client grows up to --tcp-max-links-per-target), and, for reference, over one connection.
  absl::Status Bandwidth(std::vector<Row>* rows) {
    const uint32_t max_qd = *std::max_element(s_.bw_qds.begin(), s_.bw_qds.end());
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> buffer,
                         client_.AllocateBuffer(max_qd * s_.bw_size));
    std::memset(buffer->data(), 0, buffer->size());  // fault the pages in before timing
    TouchedMemory src(s_.bw_size), dst(s_.bw_size);
    if (src.data() == nullptr || dst.data() == nullptr) {
      return absl::ResourceExhaustedError("cannot allocate the raw TCP baseline buffers");
    }
    gdrbench::StreamBuffers streams;
    const std::string size = gdr::FormatSize(s_.bw_size);
    for (gdrstore::OpKind kind : {gdrstore::OpKind::kWrite, gdrstore::OpKind::kRead}) {
      const char* verb = kind == gdrstore::OpKind::kWrite ? "Write" : "Read";
      for (uint32_t qd : s_.bw_qds) {
        Row row;
        row.name = absl::StrCat("tcp ", verb, " ", size, " stream qd", qd);
        row.unit = "GB/s";
        row.aim = ">= 0.85";
        row.aim_ratio = 0.85;
        Row one = gdrbench::InfoRow(row.name, "GB/s", "raw loopback TCP, 1 stream only");
        std::vector<uint32_t> links;  // the client's, after each measured repeat
        Progress(row.name);
        for (int r = -s_.warmup; r < s_.repeats; ++r) {
          GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult res,
                               Ops(kind, s_.bw_size, 0, s_.bw_ops, qd, false, buffer.get()));
          const uint32_t l = gdrbench::BaselineStreams({client_.transport_info().target.links});
          GDR_ASSIGN_OR_RETURN(gdrbench::StreamsResult raw,
                               gdrbench::RawTcpStreams(
                                   gdrbench::PlanStreams(s_.bw_size * s_.bw_ops, l, s_.bw_size),
                                   &streams));
          GDR_ASSIGN_OR_RETURN(double raw1,
                               gdrbench::RawTcpStream(s_.bw_size, s_.bw_ops, src, dst));
          if (r < 0) continue;
          links.push_back(l);
          row.base.push_back(raw.gbps);
          row.product.push_back(res.gbps);
          one.base.push_back(raw1);
          one.product.push_back(res.gbps);
        }
        row.baseline = absl::StrCat("raw loopback TCP, ", StreamsText(links));
        rows->push_back(std::move(row));
        rows->push_back(std::move(one));
      }
    }
    return absl::OkStatus();
  }

  // "16 streams", or "4-16 streams" when the client's links differed between repeats.
  static std::string StreamsText(const std::vector<uint32_t>& links) {
    const auto [lo, hi] = std::minmax_element(links.begin(), links.end());
    if (lo == links.end()) return "no streams";
    if (*lo == *hi) return absl::StrCat(*lo, *lo == 1 ? " stream" : " streams");
    return absl::StrCat(*lo, "-", *hi, " streams");
  }

  // (b) 4 KiB unary Write at qd 1, p50, vs an empty Ping RPC p50 on the same daemon; and how
  // much of that p50 the daemon's own time (admitted -> answered) is, which splits an op's time
  // into the daemon's part (validation, pipeline, the transport's transfer) and the RPC's.
  absl::Status Latency(std::vector<Row>* rows) {
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> buffer, client_.AllocateBuffer(4096));
    std::memset(buffer->data(), 0, buffer->size());
    Row row;
    row.name = "4KiB Write unary qd1 p50";
    row.unit = "us";
    row.baseline = "Ping RPC (empty unary) p50";
    row.aim = "<= 1.5";
    row.aim_ratio = 1.5;
    row.higher_is_better = false;
    Row daemon = gdrbench::InfoRow("4KiB Write unary qd1, daemon's time p50", "us",
                                   "4KiB Write unary qd1 p50", false);
    // The floor: gRPC's own round trip here, a minimal server in this process (no daemon).
    Row floor = gdrbench::InfoRow("Ping RPC p50", "us", "bare gRPC Ping p50 (in-process server)",
                                  false);
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrbench::BareGrpcServer> bare,
                         gdrbench::BareGrpcServer::Start());
    Progress(row.name);
    for (int r = -s_.warmup; r < s_.repeats; ++r) {
      GDR_ASSIGN_OR_RETURN(std::vector<uint64_t> bare_ping,
                           gdrbench::BarePingLoop(bare->address(), s_.lat_ops));
      GDR_ASSIGN_OR_RETURN(std::vector<uint64_t> ping, PingLoop(client_, s_.lat_ops));
      GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult res,
                           Ops(gdrstore::OpKind::kWrite, 4096, 0, s_.lat_ops, 1, true,
                               buffer.get()));
      if (r < 0) continue;
      row.base.push_back(Percentile(ping, 0.5));
      row.product.push_back(res.p50_us);
      daemon.base.push_back(res.p50_us);
      daemon.product.push_back(res.service_p50_us);
      floor.product.push_back(Percentile(ping, 0.5));
      floor.base.push_back(Percentile(bare_ping, 0.5));
    }
    rows->push_back(std::move(row));
    rows->push_back(std::move(daemon));
    rows->push_back(std::move(floor));
    return absl::OkStatus();
  }

  // (c) 4 KiB Write ops/s over one Stream at qd 32 vs unary RPCs at qd 32.
  absl::Status Rate(std::vector<Row>* rows) {
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Buffer> buffer,
                         client_.AllocateBuffer(uint64_t{s_.rate_qd} * 4096));
    std::memset(buffer->data(), 0, buffer->size());
    Row row;
    row.name = absl::StrCat("4KiB Write stream qd", s_.rate_qd);
    row.unit = "ops/s";
    row.baseline = absl::StrCat("4KiB Write unary qd", s_.rate_qd);
    row.aim = ">= 3.0";
    row.aim_ratio = 3.0;
    // The same Stream split into messages of at most N ops, then over N calls (the rate
    // line's is the client's default), against the same unary calls: their ratios read
    // against the rate line's aim.
    std::vector<Row> split;
    for (uint32_t n : s_.stream_batches) {
      split.push_back(gdrbench::InfoRow(absl::StrCat(row.name, " batch", n), row.unit,
                                        row.baseline));
    }
    for (uint32_t n : s_.stream_calls) {
      split.push_back(gdrbench::InfoRow(absl::StrCat(row.name, " calls", n), row.unit,
                                        row.baseline));
    }
    Progress(row.name);
    for (int r = -s_.warmup; r < s_.repeats; ++r) {
      GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult unary,
                           Ops(gdrstore::OpKind::kWrite, 4096, 0, s_.rate_ops, s_.rate_qd, true,
                               buffer.get()));
      GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult stream,
                           Ops(gdrstore::OpKind::kWrite, 4096, 0, s_.rate_ops, s_.rate_qd, false,
                               buffer.get()));
      std::vector<double> split_ops;
      for (uint32_t batch : s_.stream_batches) {
        GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult b,
                             Ops(gdrstore::OpKind::kWrite, 4096, 0, s_.rate_ops, s_.rate_qd,
                                 false, buffer.get(), batch));
        split_ops.push_back(b.ops_per_sec);
      }
      for (uint32_t n : s_.stream_calls) {
        GDR_ASSIGN_OR_RETURN(gdrctl::BenchResult b,
                             Ops(gdrstore::OpKind::kWrite, 4096, 0, s_.rate_ops, s_.rate_qd,
                                 false, buffer.get(), 0, n));
        split_ops.push_back(b.ops_per_sec);
      }
      if (r < 0) continue;
      row.base.push_back(unary.ops_per_sec);
      row.product.push_back(stream.ops_per_sec);
      for (size_t i = 0; i < split.size(); ++i) {
        split[i].base.push_back(unary.ops_per_sec);
        split[i].product.push_back(split_ops[i]);
      }
    }
    rows->push_back(std::move(row));
    for (Row& r : split) rows->push_back(std::move(r));
    return absl::OkStatus();
  }

  const Settings& s_;
  gdrstore::Client& client_;
};

// The volume of the groups' daemon: the bandwidth lines' extents at their largest qd (each
// slot its own extent) plus the small-op area, and never less than the 256 MiB it always had.
uint64_t GroupVolumeBytes(const Settings& s) {
  const uint32_t max_qd = *std::max_element(s.bw_qds.begin(), s.bw_qds.end());
  const uint64_t need = uint64_t{max_qd} * s.bw_size + uint64_t{s.rate_qd} * 4096;
  return std::max<uint64_t>(256 * kMiB, (need + kMiB - 1) / kMiB * kMiB);
}

int Main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  Settings s;
  if (std::optional<int> exit = gdrbench::ParseFlags(argc, argv, &s)) return *exit;

  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "gdr_bench: %s: %s\n", absl::StatusCodeToString(st.code()).c_str(),
                 std::string(st.message()).c_str());
    return 1;
  };
  // The groups (a)-(e) share one daemon; scale starts its own once that one has stopped.
  const bool want_groups =
      s.only.empty() || std::any_of(s.only.begin(), s.only.end(),
                                    [](const std::string& g) { return g != "scale"; });
  std::vector<Row> rows;
  std::string cmd;
  if (want_groups) {
    gdrbench::DaemonStart how;
    how.binary = s.daemon;
    how.extra_flags = s.daemon_flags;
    how.volume_bytes = GroupVolumeBytes(s);
    how.max_op_bytes = std::max<uint64_t>(s.bw_size, 4096);
    how.ready_timeout = std::chrono::milliseconds(s.ready_timeout_ms);
    if (!s.json) std::fprintf(stderr, "gdr_bench: starting %s\n", s.daemon.c_str());
    absl::StatusOr<std::unique_ptr<gdrbench::DaemonProcess>> daemon =
        gdrbench::DaemonProcess::Start(how);
    if (!daemon.ok()) return fail(daemon.status());
    {
      gdrstore::ClientOptions o;
      o.daemon_address = (*daemon)->address();
      o.gpu_staging_slot_bytes = s.gpu_slot;
      absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = gdrstore::Client::Connect(o);
      if (!client.ok()) return fail(client.status());
      Bench bench(s, **client);
      if (absl::Status st = bench.Run(&rows); !st.ok()) return fail(st);
    }
    cmd = (*daemon)->command();
    daemon->reset();  // stop the daemon before printing: nothing else runs while we report
  }
  std::optional<gdrbench::ScaleReport> scale;
  if (s.want_scale) {
    absl::StatusOr<gdrbench::ScaleReport> r = gdrbench::RunScale(s.scale);
    if (!r.ok()) return fail(r.status());
    scale = *std::move(r);
  }
  if (s.json) {
    PrintJson(rows, s.repeats, s.warmup, cmd, scale ? &scale->json : nullptr);
    if (scale) std::fprintf(stderr, "gdr_bench: %s\n", scale->plot_note.c_str());
  } else {
    if (want_groups) PrintTable(rows, s.repeats, s.warmup, cmd);
    if (scale) {
      std::printf("%s%s\n%s\n", want_groups ? "\n" : "", scale->table.c_str(),
                  scale->plot_note.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A scale client process: gdr_bench re-executed by its own scale group.
  if (argc > 1 && std::strcmp(argv[1], gdrbench::kScaleClientFlag) == 0) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    return gdrbench::RunScaleClient(argc, argv);
  }
  // As in gdrstored and gdrctl: no Mutex deadlock detection in measured binaries.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Main(argc, argv);
}
