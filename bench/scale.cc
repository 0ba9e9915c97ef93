// The scale group of gdr_bench (bench/scale.h): N client processes against one daemon, the bulk,
// small-op and many-client lines with their raw-TCP baselines, the aims, the table and the JSON.
// Over 600 lines because: one ScaleRun owns the run's state from the first line to the report,
// and its table and JSON read that state directly; split, they would need it all in a header.
#include "bench/scale.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/client_fleet.h"
#include "bench/daemon_process.h"
#include "bench/raw_tcp.h"
#include "bench/report_text.h"
#include "bench/temp_path.h"
#include "bench/scale_plot.h"
#include "common/base/json.h"
#include "common/cuda/gpu.h"
#include "common/base/status_macros.h"
#include "common/base/units.h"
#include "gdrstore/client.h"

namespace gdrbench {
namespace {

using gdrstore::OpKind;

constexpr uint64_t kSmallSize = 4096;
constexpr uint32_t kSmallQd = 32;
constexpr uint64_t kManySize = 64 << 10;
constexpr uint32_t kManyQd = 4;
// The many-client lines are judged against as many clients as the daemon's default tcp link
// pool has links (TcpOptions::max_links): up to there every client can hold a link of its own.
constexpr uint32_t kManyBase = 64;
constexpr uint32_t kGpuClients = 8;
// The aims are stated for 8 clients; a machine with fewer CPUs is judged at its largest N.
constexpr uint32_t kAimClients = 8;

const char* OpName(OpKind k) { return k == OpKind::kWrite ? "Write" : "Read"; }

// One run of N client processes, aggregated: total bytes over the earliest start to the
// latest end among the clients that succeeded.
struct Outcome {
  uint32_t clients = 0;
  uint32_t failed = 0;
  std::map<std::string, uint32_t> codes;  // failed clients by status code
  std::string first_failure;              // "client 3 (pid 123): CODE: message"
  uint64_t bytes = 0, ops = 0;
  double seconds = 0, gbps = 0, ops_per_sec = 0;
  uint32_t streams = 0;  // raw TCP streams at the same parallelism: BaselineStreams of the links
  // Summed over the clients: GPU time of their targets' staging copies, their link threads'
  // time blocked on those copies, and links x each client's own op-loop time.
  double gpu_copy_s = 0, gpu_wait_s = 0, link_s = 0;
};

Outcome Aggregate(const std::vector<ClientReport>& reports) {
  Outcome o;
  o.clients = static_cast<uint32_t>(reports.size());
  int64_t first = INT64_MAX, last = INT64_MIN;
  std::vector<uint32_t> links;
  for (const ClientReport& r : reports) {
    if (r.kind != ClientReport::Kind::kDone) {
      ++o.failed;
      ++o.codes[r.code];
      if (o.first_failure.empty()) {
        o.first_failure =
            absl::StrCat("client ", r.index, " (pid ", r.pid, "): ", r.code, ": ", r.message);
      }
      continue;
    }
    o.bytes += r.bytes;
    o.ops += r.ops;
    links.push_back(r.links);
    o.gpu_copy_s += static_cast<double>(r.gpu_copy_ns) / 1e9;
    o.gpu_wait_s += static_cast<double>(r.gpu_wait_ns) / 1e9;
    o.link_s += static_cast<double>(r.links) * static_cast<double>(r.end_ns - r.start_ns) / 1e9;
    first = std::min(first, r.start_ns);
    last = std::max(last, r.end_ns);
  }
  if (last > first) {
    o.seconds = static_cast<double>(last - first) / 1e9;
    o.gbps = static_cast<double>(o.bytes) / o.seconds / 1e9;
    o.ops_per_sec = static_cast<double>(o.ops) / o.seconds;
  }
  o.streams = BaselineStreams(links);
  return o;
}

double Ratio(double a, double b) { return b == 0 ? 0 : a / b; }

std::string Fmt(const std::vector<double>& v, int decimals) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(absl::StrFormat("%.*f", decimals, x));
  return absl::StrJoin(parts, ",");
}

// Samples as a JSON array, each to 4 decimals.
gdr::json::Json JsonNumbers(const std::vector<double>& v) {
  gdr::json::Json out = gdr::json::Json::array();
  for (double x : v) out.push_back(gdr::json::Fixed(x, 4));
  return out;
}

struct BulkLine {
  OpKind kind = OpKind::kWrite;
  uint32_t clients = 0;
  std::vector<double> gbps, ops_per_sec, base_gbps;  // one sample per repeat
  std::vector<double> streams;  // the raw TCP streams of each repeat: the clients' links
};

struct SmallLine {
  uint32_t clients = 0;
  std::vector<double> ops_per_sec;
};

struct ManyLine {
  uint32_t clients = 0;
  std::vector<double> gbps, ops_per_sec, failed;
  std::map<std::string, uint32_t> codes;
  std::string first_failure;
};

struct GpuLine {
  bool asked = false;
  std::string skipped;  // why it did not run; empty when it ran
  std::string gpu;      // "0 0000:b7:00.0 NVIDIA H100 ..."
  std::vector<double> gpu_gbps, host_gbps;
  // Per repeat, the GPU line's profile: the targets' staging copies' GPU time over the run's
  // window (above 1: copies of several links overlapped), and the share of the link threads'
  // time they spent blocked on those copies.
  std::vector<double> copy_busy, wait_share;
};

struct Aim {
  std::string name;
  double value = 0;
  double aim = 0;
  bool informational = false;
  std::string AimText() const {
    return informational ? "info" : absl::StrFormat(">= %.2f", aim);
  }
  const char* Met() const { return informational ? "-" : (value >= aim ? "yes" : "NO"); }
};

class ScaleRun {
 public:
  // `probe` is only used until the last line has run (Table and Json need neither it nor the
  // daemon, which is stopped by then).
  ScaleRun(const ScaleSettings& s, const DaemonProcess& daemon, gdrstore::Client& probe,
           std::string log)
      : s_(s),
        address_(daemon.address()),
        command_(daemon.command()),
        probe_(probe),
        log_(std::move(log)) {}

  // (1) Write or Read at every N beside raw TCP at the same parallelism: as many streams as
  // the N clients had links at the end of that repeat, moving the same bytes.
  absl::Status Bulk(OpKind kind, StreamBuffers* buffers) {
    const uint32_t max_n = s_.clients.back();
    for (int w = 0; w < s_.warmup; ++w) {
      Progress(absl::StrCat("scale warm-up: ", OpName(kind), " ", max_n, " clients"));
      GDR_RETURN_IF_ERROR(Clients(max_n, kind, s_.size, s_.ops, s_.qd, "").status());
    }
    for (uint32_t n : s_.clients) {
      BulkLine line;
      line.kind = kind;
      line.clients = n;
      for (int r = 0; r < s_.repeats; ++r) {
        Progress(absl::StrCat("scale ", OpName(kind), " ", n, " clients, repeat ", r + 1, "/",
                              s_.repeats));
        GDR_ASSIGN_OR_RETURN(Outcome o, Clients(n, kind, s_.size, s_.ops, s_.qd, ""));
        GDR_ASSIGN_OR_RETURN(StreamsResult base,
                             RawTcpStreams(PlanStreams(o.bytes, o.streams, s_.size), buffers));
        line.streams.push_back(o.streams);
        line.base_gbps.push_back(base.gbps);
        line.gbps.push_back(o.gbps);
        line.ops_per_sec.push_back(o.ops_per_sec);
      }
      bulk_.push_back(std::move(line));
    }
    return absl::OkStatus();
  }

  // (2) 4 KiB Writes at qd 32 per client: ops/s at every N.
  absl::Status Small() {
    const uint32_t max_n = s_.clients.back();
    for (int w = 0; w < s_.warmup; ++w) {
      Progress(absl::StrCat("scale warm-up: 4 KiB Write ", max_n, " clients"));
      GDR_RETURN_IF_ERROR(
          Clients(max_n, OpKind::kWrite, kSmallSize, s_.small_ops, kSmallQd, "").status());
    }
    for (uint32_t n : s_.clients) {
      SmallLine line;
      line.clients = n;
      for (int r = 0; r < s_.repeats; ++r) {
        Progress(absl::StrCat("scale 4 KiB Write ", n, " clients, repeat ", r + 1, "/",
                              s_.repeats));
        GDR_ASSIGN_OR_RETURN(Outcome o,
                             Clients(n, OpKind::kWrite, kSmallSize, s_.small_ops, kSmallQd, ""));
        line.ops_per_sec.push_back(o.ops_per_sec);
      }
      small_.push_back(std::move(line));
    }
    return absl::OkStatus();
  }

  // (3) Many clients against the default link pool; failed clients are counted, not fatal.
  absl::Status Many() {
    std::vector<uint32_t> counts = {kManyBase};
    for (uint32_t m : s_.many)
      if (m != kManyBase) counts.push_back(m);
    for (uint32_t m : counts) {
      ManyLine line;
      line.clients = m;
      many_.push_back(std::move(line));
    }
    for (int r = 0; r < s_.repeats; ++r) {
      for (ManyLine& line : many_) {
        Progress(absl::StrCat("scale many: 64 KiB Write ", line.clients, " clients, repeat ",
                              r + 1, "/", s_.repeats));
        GDR_ASSIGN_OR_RETURN(Outcome o, Clients(line.clients, OpKind::kWrite, kManySize,
                                                s_.many_ops, kManyQd, "", /*tolerate=*/true));
        line.gbps.push_back(o.gbps);
        line.ops_per_sec.push_back(o.ops_per_sec);
        line.failed.push_back(o.failed);
        for (const auto& [code, count] : o.codes) line.codes[code] += count;
        if (line.first_failure.empty()) line.first_failure = o.first_failure;
      }
    }
    return absl::OkStatus();
  }

  // (4) 8 clients Writing into GPU memory vs 8 into host memory.
  absl::Status Gpu() {
    gpu_.asked = true;
    absl::StatusOr<gdr::cuda::GpuInfo> gpu = gdr::cuda::FindGpu(s_.gpu);
    if (!gpu.ok()) {
      gpu_.skipped = std::string(gpu.status().message());
      Progress(absl::StrCat("scale gpu: skipped (", gpu_.skipped, ")"));
      return absl::OkStatus();
    }
    gpu_.gpu = absl::StrCat(gpu->ordinal, " ", gpu->pci, " ", gpu->name);
    for (int r = 0; r < s_.repeats; ++r) {
      Progress(absl::StrCat("scale gpu: Write ", kGpuClients, " clients, repeat ", r + 1, "/",
                            s_.repeats));
      GDR_ASSIGN_OR_RETURN(Outcome host,
                           Clients(kGpuClients, OpKind::kWrite, s_.size, s_.ops, s_.qd, ""));
      GDR_ASSIGN_OR_RETURN(Outcome dev,
                           Clients(kGpuClients, OpKind::kWrite, s_.size, s_.ops, s_.qd, gpu->pci));
      gpu_.host_gbps.push_back(host.gbps);
      gpu_.gpu_gbps.push_back(dev.gbps);
      gpu_.copy_busy.push_back(Ratio(dev.gpu_copy_s, dev.seconds));
      gpu_.wait_share.push_back(Ratio(dev.gpu_wait_s, dev.link_s));
    }
    return absl::OkStatus();
  }

  std::string Table() const;
  std::string Json() const;

 private:
  // Runs n clients, client i on [i*qd*size, (i+1)*qd*size) of vol0. Unless `tolerate`, the
  // first failed client fails the line.
  absl::StatusOr<Outcome> Clients(uint32_t n, OpKind kind, uint64_t size, uint64_t ops,
                                  uint32_t qd, const std::string& gpu, bool tolerate = false) {
    WaitForIdlePool();
    std::vector<ScaleClientArgs> args(n);
    for (uint32_t i = 0; i < n; ++i) {
      ScaleClientArgs& a = args[i];
      a.daemon_address = address_;
      a.kind = kind;
      a.size = size;
      a.ops = ops;
      a.qd = qd;
      a.offset = uint64_t{i} * qd * size;
      a.gpu = gpu;
      a.gpu_slot = s_.gpu_slot;
      a.stream_calls = s_.stream_calls;
    }
    absl::StatusOr<std::vector<ClientReport>> reports =
        ClientFleet::Run(s_.self, args, log_, FleetLimits{});
    if (!reports.ok()) {
      return absl::Status(reports.status().code(),
                          absl::StrCat(reports.status().message(), " (client log: ", log_, ")"));
    }
    Outcome o = Aggregate(*reports);
    if (o.failed > 0 && !tolerate) {
      std::vector<std::string> codes;
      for (const auto& [code, count] : o.codes) codes.push_back(absl::StrCat(code, " x", count));
      return absl::Status(absl::StatusCode::kAborted,
                          absl::StrCat(o.failed, " of ", n, " clients failed (", OpName(kind),
                                       " ", gdr::FormatSize(size), " qd ", qd, "): ",
                                       absl::StrJoin(codes, ", "), "; first: ", o.first_failure));
    }
    return o;
  }

  // Every run starts from an empty tcp link pool: the links of the last run's clients die when
  // those processes exit, and the daemon reaps them within its housekeeping period. Waits up
  // to 10 s; a daemon without GetStats is not waited for.
  void WaitForIdlePool() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (;;) {
      absl::StatusOr<gdrstore::v1::GetStatsResponse> resp =
          probe_.GetStats(std::chrono::seconds(5));
      if (!resp.ok()) return;
      uint32_t in_use = 0;
      for (const auto& t : resp->transports())
        if (t.transport() == gdrstore::v1::TRANSPORT_TCP) in_use += t.pool().in_use();
      if (in_use == 0) return;
      if (absl::Now() > deadline) {
        if (!warned_pool_) {
          std::fprintf(stderr,
                       "gdr_bench: the daemon still holds %u tcp links 10 s after the last "
                       "clients exited; going on\n",
                       in_use);
          warned_pool_ = true;
        }
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void Progress(const std::string& what) const {
    if (!s_.quiet) std::fprintf(stderr, "  ... %s\n", what.c_str());
  }

  // The bulk line of `kind` at `n` clients; null when not measured.
  const BulkLine* FindBulk(OpKind kind, uint32_t n) const {
    for (const BulkLine& l : bulk_)
      if (l.kind == kind && l.clients == n) return &l;
    return nullptr;
  }
  // Efficiency of a median aggregate at n against the smallest N's: agg(n) * n0 / (n * agg(n0)).
  double Efficiency(double agg, uint32_t n, double agg0, uint32_t n0) const {
    return Ratio(agg * n0, static_cast<double>(n) * agg0);
  }
  // A bulk line's share of raw TCP at the same parallelism, against the smallest N's share:
  // unlike aggregate(N) / aggregate(n0), it still falls when adding clients costs the product
  // more than it costs raw TCP, even where one client already fills the link.
  double Scaling(const BulkLine& l) const {
    const BulkLine* ref = FindBulk(l.kind, s_.clients.front());
    return Ratio(Ratio(Median(l.gbps), Median(l.base_gbps)),
                 Ratio(Median(ref->gbps), Median(ref->base_gbps)));
  }
  std::vector<Aim> Aims() const;

  const ScaleSettings& s_;
  const std::string address_, command_;
  gdrstore::Client& probe_;
  std::string log_;
  bool warned_pool_ = false;
  std::vector<BulkLine> bulk_;
  std::vector<SmallLine> small_;
  std::vector<ManyLine> many_;
  GpuLine gpu_;
};

std::vector<Aim> ScaleRun::Aims() const {
  std::vector<Aim> aims;
  if (!s_.clients.empty()) {
    // The aims name 8 clients; with fewer in the list the largest N stands in for it.
    uint32_t n = s_.clients.back();
    for (uint32_t c : s_.clients)
      if (c == kAimClients) n = c;
    const uint32_t n0 = s_.clients.front();
    const BulkLine* w = FindBulk(OpKind::kWrite, n);
    const BulkLine* r = FindBulk(OpKind::kRead, n);
    if (w && r) {
      aims.push_back({absl::StrCat("Write / Read aggregate, ", n, " clients"),
                      Ratio(Median(w->gbps), Median(r->gbps)), 0.8});
    }
    if (w) {
      aims.push_back({absl::StrFormat("Write %u clients / raw TCP, %.0f streams", n,
                                      Median(w->streams)),
                      Ratio(Median(w->gbps), Median(w->base_gbps)), 0.9});
    }
    if (n > n0) {
      for (OpKind k : {OpKind::kWrite, OpKind::kRead}) {
        const BulkLine* hi = FindBulk(k, n);
        if (!FindBulk(k, n0) || !hi) continue;
        // Against raw TCP at the same streams, N clients keep 0.9 of n0's share.
        aims.push_back({absl::StrCat("scaling ", n0, " -> ", n, " clients, ", OpName(k),
                                     ", vs raw TCP"),
                        Scaling(*hi), 0.9});
      }
    }
  }
  if (many_.size() > 1) {
    const double base = Median(many_.front().gbps);
    for (size_t i = 1; i < many_.size(); ++i) {
      aims.push_back({absl::StrCat(many_[i].clients, " clients / ", kManyBase, " clients"),
                      Ratio(Median(many_[i].gbps), base), 0.9});
    }
  }
  if (gpu_.asked && gpu_.skipped.empty()) {
    aims.push_back({absl::StrCat(kGpuClients, " clients into GPU / into host memory"),
                    Ratio(Median(gpu_.gpu_gbps), Median(gpu_.host_gbps)), 0.8});
  }
  return aims;
}

std::string ScaleRun::Table() const {
  std::string t = absl::StrFormat(
      "scale: tcp, %s ops, qd %u, %u ops per client; %d repeats (median), %d warm-up; nproc %u, "
      "CPU %s\ndaemon: %s\n",
      gdr::FormatSize(s_.size), s_.qd, s_.ops, s_.repeats, s_.warmup,
      std::thread::hardware_concurrency(), MachineCpu(), command_);
  if (!bulk_.empty()) {
    absl::StrAppendFormat(&t, "\n%7s  %-5s %13s %10s %8s %13s %6s %8s %11s\n", "clients", "op",
                          "product GB/s", "ops/s", "streams", "raw TCP GB/s", "ratio",
                          "scaling", "efficiency");
    for (const BulkLine& l : bulk_) {
      const BulkLine* ref = FindBulk(l.kind, s_.clients.front());
      absl::StrAppendFormat(
          &t, "%7u  %-5s %13.3f %10.1f %8.0f %13.3f %6.2f %8.2f %11.2f\n", l.clients,
          OpName(l.kind), Median(l.gbps), Median(l.ops_per_sec), Median(l.streams),
          Median(l.base_gbps), Ratio(Median(l.gbps), Median(l.base_gbps)), Scaling(l),
          Efficiency(Median(l.gbps), l.clients, Median(ref->gbps), ref->clients));
    }
    const uint32_t n0 = s_.clients.front();
    absl::StrAppendFormat(&t,
                          "raw TCP: a loopback connection (stream) per tcp link the N clients "
                          "had, a sender and a\nreceiver thread each, the same bytes; ratio = "
                          "product / raw TCP; scaling = ratio(N) / ratio(%u):\nwhat more clients "
                          "cost beyond what they cost raw TCP; efficiency = aggregate(N) / (%s x "
                          "aggregate(%u))\n",
                          n0, n0 == 1 ? "N" : absl::StrCat("N/", n0), n0);
  }
  if (!small_.empty()) {
    absl::StrAppendFormat(&t,
                          "\nsmall ops: 4 KiB Write, qd %u per client, Stream, %u ops per "
                          "client\n",
                          kSmallQd, s_.small_ops);
    absl::StrAppendFormat(&t, "%7s %12s %11s\n", "clients", "ops/s", "efficiency");
    for (const SmallLine& l : small_) {
      const SmallLine& ref = small_.front();
      absl::StrAppendFormat(&t, "%7u %12.0f %11.2f\n", l.clients, Median(l.ops_per_sec),
                            Efficiency(Median(l.ops_per_sec), l.clients,
                                       Median(ref.ops_per_sec), ref.clients));
    }
  }
  if (!many_.empty()) {
    absl::StrAppendFormat(&t,
                          "\nmany clients: 64 KiB Write, qd %u per client, %u ops per client, "
                          "the daemon's default link pool\n",
                          kManyQd, s_.many_ops);
    absl::StrAppendFormat(&t, "%7s %8s %10s  %-24s %s\n", "clients", "GB/s", "ops/s",
                          "failed clients/repeat", absl::StrCat("vs ", kManyBase, " clients"));
    const double base = Median(many_.front().gbps);
    for (const ManyLine& l : many_) {
      std::vector<std::string> failed;
      for (double f : l.failed) failed.push_back(absl::StrCat(static_cast<uint32_t>(f)));
      absl::StrAppendFormat(&t, "%7u %8.3f %10.0f  %-24s %.2f\n", l.clients, Median(l.gbps),
                            Median(l.ops_per_sec), absl::StrJoin(failed, ","),
                            Ratio(Median(l.gbps), base));
    }
    for (const ManyLine& l : many_) {
      if (l.codes.empty()) continue;
      std::vector<std::string> codes;
      for (const auto& [code, count] : l.codes) codes.push_back(absl::StrCat(code, " x", count));
      absl::StrAppendFormat(&t, "  %u clients, failures over all repeats: %s; first: %s\n",
                            l.clients, absl::StrJoin(codes, ", "), l.first_failure);
    }
  }
  if (gpu_.asked) {
    if (!gpu_.skipped.empty()) {
      absl::StrAppendFormat(&t, "\ngpu: skipped: %s\n", gpu_.skipped);
    } else {
      absl::StrAppendFormat(&t,
                            "\ngpu %s: %u clients, %s Write qd %u: into GPU %.3f GB/s, into host "
                            "%.3f GB/s\n",
                            gpu_.gpu, kGpuClients, gdr::FormatSize(s_.size), s_.qd,
                            Median(gpu_.gpu_gbps), Median(gpu_.host_gbps));
      absl::StrAppendFormat(&t,
                            "  staging copies' GPU time / window %.2f; link threads blocked on "
                            "them %.1f %% of their time\n",
                            Median(gpu_.copy_busy), 100 * Median(gpu_.wait_share));
    }
  }
  const std::vector<Aim> aims = Aims();
  if (!aims.empty()) {
    absl::StrAppendFormat(&t, "\n%-46s %8s  %-8s %s\n", "aim", "value", "aim", "met");
    for (const Aim& a : aims) {
      absl::StrAppendFormat(&t, "%-46s %8.2f  %-8s %s\n", a.name, a.value, a.AimText(), a.Met());
    }
  }
  if (!bulk_.empty() || !small_.empty() || !many_.empty() || !gpu_.gpu_gbps.empty()) {
    t += "\nsamples:\n";
  }
  for (const BulkLine& l : bulk_) {
    absl::StrAppendFormat(&t, "  %-5s %3u clients  GB/s %s | raw TCP %s | streams %s\n",
                          OpName(l.kind), l.clients, Fmt(l.gbps, 3), Fmt(l.base_gbps, 3),
                          Fmt(l.streams, 0));
  }
  for (const SmallLine& l : small_) {
    absl::StrAppendFormat(&t, "  4 KiB %3u clients  ops/s %s\n", l.clients,
                          Fmt(l.ops_per_sec, 0));
  }
  for (const ManyLine& l : many_) {
    absl::StrAppendFormat(&t, "  many  %3u clients  GB/s %s\n", l.clients, Fmt(l.gbps, 3));
  }
  if (gpu_.asked && gpu_.skipped.empty()) {
    absl::StrAppendFormat(&t, "  gpu     %u clients  GB/s %s | host %s\n", kGpuClients,
                          Fmt(gpu_.gpu_gbps, 3), Fmt(gpu_.host_gbps, 3));
  }
  return t;
}

std::string ScaleRun::Json() const {
  using gdr::json::Fixed;
  using Doc = gdr::json::Json;
  Doc bulk = Doc::array(), small = Doc::array(), many = Doc::array(), aims = Doc::array();
  for (const BulkLine& l : bulk_) {
    const BulkLine* ref = FindBulk(l.kind, s_.clients.front());
    bulk.push_back(
        {{"op", l.kind == OpKind::kWrite ? "write" : "read"},
         {"clients", l.clients},
         {"gbps", Fixed(Median(l.gbps), 4)},
         {"ops_per_sec", Fixed(Median(l.ops_per_sec), 1)},
         {"baseline_gbps", Fixed(Median(l.base_gbps), 4)},
         {"baseline_streams", Fixed(Median(l.streams), 1)},
         {"ratio", Fixed(Ratio(Median(l.gbps), Median(l.base_gbps)), 4)},
         {"scaling", Fixed(Scaling(l), 4)},
         {"efficiency",
          Fixed(Efficiency(Median(l.gbps), l.clients, Median(ref->gbps), ref->clients), 4)},
         {"baseline_efficiency",
          Fixed(Efficiency(Median(l.base_gbps), l.clients, Median(ref->base_gbps), ref->clients),
                4)},
         {"gbps_samples", JsonNumbers(l.gbps)},
         {"ops_per_sec_samples", JsonNumbers(l.ops_per_sec)},
         {"baseline_samples", JsonNumbers(l.base_gbps)},
         {"baseline_streams_samples", JsonNumbers(l.streams)}});
  }
  for (const SmallLine& l : small_) {
    small.push_back({{"clients", l.clients},
                     {"ops_per_sec", Fixed(Median(l.ops_per_sec), 1)},
                     {"efficiency", Fixed(Efficiency(Median(l.ops_per_sec), l.clients,
                                                     Median(small_.front().ops_per_sec),
                                                     small_.front().clients),
                                          4)},
                     {"samples", JsonNumbers(l.ops_per_sec)}});
  }
  for (const ManyLine& l : many_) {
    Doc codes = Doc::object();
    for (const auto& [code, count] : l.codes) codes[code] = count;
    many.push_back({{"clients", l.clients},
                    {"gbps", Fixed(Median(l.gbps), 4)},
                    {"ops_per_sec", Fixed(Median(l.ops_per_sec), 1)},
                    {"vs_base", Fixed(Ratio(Median(l.gbps), Median(many_.front().gbps)), 4)},
                    {"failed_clients", JsonNumbers(l.failed)},
                    {"failure_codes", std::move(codes)},
                    {"first_failure", l.first_failure},
                    {"gbps_samples", JsonNumbers(l.gbps)}});
  }
  Doc gpu;  // null when not asked for
  if (gpu_.asked && !gpu_.skipped.empty()) {
    gpu = {{"skipped", gpu_.skipped}};
  } else if (gpu_.asked) {
    gpu = {{"gpu", gpu_.gpu},
           {"clients", kGpuClients},
           {"gbps", Fixed(Median(gpu_.gpu_gbps), 4)},
           {"host_gbps", Fixed(Median(gpu_.host_gbps), 4)},
           {"ratio", Fixed(Ratio(Median(gpu_.gpu_gbps), Median(gpu_.host_gbps)), 4)},
           {"gbps_samples", JsonNumbers(gpu_.gpu_gbps)},
           {"host_samples", JsonNumbers(gpu_.host_gbps)},
           {"copy_busy", Fixed(Median(gpu_.copy_busy), 4)},
           {"wait_share", Fixed(Median(gpu_.wait_share), 4)}};
  }
  for (const Aim& a : Aims()) {
    aims.push_back({{"name", a.name},
                    {"value", Fixed(a.value, 4)},
                    {"aim", a.AimText()},
                    {"met", a.value >= a.aim}});
  }
  const Doc settings = {{"size", s_.size},           {"qd", s_.qd},
                        {"ops", s_.ops},             {"small_size", kSmallSize},
                        {"small_qd", kSmallQd},      {"small_ops", s_.small_ops},
                        {"stream_calls", s_.stream_calls},
                        {"many_size", kManySize},    {"many_qd", kManyQd},
                        {"many_ops", s_.many_ops},   {"many_base", kManyBase},
                        {"repeats", s_.repeats},     {"warmup", s_.warmup},
                        {"clients", s_.clients}};
  const Doc doc = {{"nproc", std::thread::hardware_concurrency()},
                   {"cpu", MachineCpu()},
                   {"daemon", command_},
                   {"settings", settings},
                   {"bulk", std::move(bulk)},
                   {"small", std::move(small)},
                   {"many", std::move(many)},
                   {"gpu", std::move(gpu)},
                   {"aims", std::move(aims)},
                   {"plot", s_.plot},
                   {"plot_data", PlotDataPath(s_.plot)}};
  return gdr::json::Dump(doc);
}

}  // namespace

std::vector<uint32_t> DefaultScaleClients(unsigned nproc) {
  std::vector<uint32_t> out;
  for (uint32_t n : {1u, 2u, 4u, 8u, 16u})
    if (n <= std::max(1u, nproc)) out.push_back(n);
  return out;
}

absl::StatusOr<std::vector<uint32_t>> ParseClientCounts(absl::string_view text,
                                                         absl::string_view flag, uint32_t limit) {
  std::vector<uint32_t> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    uint32_t n = 0;
    if (!absl::SimpleAtoi(item, &n) || n == 0 || n > limit) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", item,
                                                     "' is not a client count 1..", limit,
                                                     " (give a comma-separated list, e.g. 1,2,4)"));
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<ScaleReport> RunScale(const ScaleSettings& s) {
  if (s.clients.empty() && s.many.empty() && s.gpu.empty()) {
    return absl::InvalidArgumentError(
        "scale: nothing to run (--scale-clients and --scale-many are empty and no --gpu)");
  }
  // vol0 holds the largest line's extents: client i of a line owns [i*qd*size, (i+1)*qd*size).
  const uint32_t max_n = s.clients.empty() ? 0 : s.clients.back();
  uint32_t max_many = s.many.empty() ? 0 : std::max(kManyBase, s.many.back());
  uint64_t volume = uint64_t{max_n} * s.qd * s.size;
  volume = std::max(volume, uint64_t{max_n} * kSmallQd * kSmallSize);
  volume = std::max(volume, uint64_t{max_many} * kManyQd * kManySize);
  if (!s.gpu.empty()) volume = std::max(volume, uint64_t{kGpuClients} * s.qd * s.size);
  constexpr uint64_t kMiB = 1 << 20;
  volume = (volume + kMiB - 1) / kMiB * kMiB;

  std::string dir_template = TempTemplate("gdr_bench_scale");
  if (::mkdtemp(dir_template.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", dir_template));
  }
  const std::string dir = dir_template;
  const std::string log = dir + "/clients.log";
  bool keep_log = false;
  struct RemoveDir {
    const std::string& dir;
    const bool& keep;
    ~RemoveDir() {
      std::error_code ec;
      if (!keep) std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{dir, keep_log};

  DaemonStart how;
  how.binary = s.daemon;
  how.extra_flags = s.daemon_flags;
  how.volume_bytes = volume;
  how.max_op_bytes = std::max<uint64_t>(s.size, kManySize);
  how.ready_timeout = s.ready_timeout;
  if (!s.quiet) std::fprintf(stderr, "gdr_bench: starting %s for scale\n", s.daemon.c_str());
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<DaemonProcess> daemon, DaemonProcess::Start(how));
  gdrstore::ClientOptions o;
  o.daemon_address = daemon->address();
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdrstore::Client> probe, gdrstore::Client::Connect(o));

  ScaleRun run(s, *daemon, *probe, log);
  absl::Status st;
  if (!s.clients.empty()) {
    StreamBuffers buffers;  // grown to each line's streams as they are known
    st = run.Bulk(OpKind::kWrite, &buffers);
    if (st.ok()) st = run.Bulk(OpKind::kRead, &buffers);
    if (st.ok()) st = run.Small();
  }
  if (st.ok() && !s.many.empty()) st = run.Many();
  if (st.ok() && !s.gpu.empty()) st = run.Gpu();
  if (!st.ok()) {
    keep_log = true;  // the clients' stderr explains what the status may not
    return st;
  }
  ScaleReport report;
  report.daemon_command = daemon->command();
  probe.reset();
  daemon.reset();  // stopped before plotting: nothing else runs while we report

  // The JSON the plot is made from sits beside the PNG, so the plot can be made elsewhere.
  report.json = run.Json();
  report.table = run.Table();
  if (s.clients.empty()) {
    report.plot_note = "no plot: it shows the bulk lines, and --scale-clients was empty";
  } else {
    report.plot_note = WriteScalePlot(report.json, s.plot).note;
  }
  return report;
}

}  // namespace gdrbench
