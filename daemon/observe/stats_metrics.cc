#include "daemon/observe/stats_metrics.h"

#include <limits>
#include <map>
#include <string>
#include <utility>

#include "common/wire/transport_kind.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// "get" = store -> the caller's buffer (the Write RPC), "put" = the caller's
// buffer -> store.
constexpr const char* kGet = "get";
constexpr const char* kPut = "put";

// Families by name, in the order they were declared, so a scrape reads the same
// every time.
class Families {
 public:
  void Declare(const std::string& name, MetricType type, const std::string& help) {
    if (index_.count(name) != 0) return;
    index_[name] = out_.size();
    MetricFamily f;
    f.name = name;
    f.type = type;
    f.help = help;
    out_.push_back(std::move(f));
  }
  void Counter(const std::string& name, Labels labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    m.counter.value = value;
    Add(name, std::move(m));
  }
  void Gauge(const std::string& name, Labels labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = value;
    Add(name, std::move(m));
  }
  void Add(const std::string& name, ClientMetric m) {
    out_[index_.at(name)].metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> Take() { return std::move(out_); }

 private:
  std::vector<MetricFamily> out_;
  std::map<std::string, size_t> index_;
};

Labels With(Labels base, const char* name, std::string value) {
  base.push_back({name, std::move(value)});
  return base;
}

// The op families of one scope: `prefix` is "gdrstored_" for the daemon's
// totals and "gdrstored_volume_" etc. for a scope named by `scope` (empty for
// the totals).
void DeclareOpFamilies(Families& f, const std::string& prefix, const std::string& what) {
  f.Declare(prefix + "ops_total", MetricType::Counter,
            "Ops completed successfully " + what +
                ", by direction (get: store -> caller, put: "
                "caller -> store)");
  f.Declare(prefix + "op_bytes_total", MetricType::Counter,
            "Bytes moved by successful ops " + what + ", by direction");
  f.Declare(prefix + "op_errors_total", MetricType::Counter,
            "Ops that failed or were refused " + what + ", by status code");
  f.Declare(prefix + "inflight_ops", MetricType::Gauge, "Ops in flight " + what);
  f.Declare(prefix + "inflight_bytes", MetricType::Gauge, "Bytes of the ops in flight " + what);
}

void AddOps(Families& f, const std::string& prefix, const Labels& scope, const v1::OpCounters& c) {
  f.Counter(prefix + "ops_total", With(scope, "direction", kGet), c.write_ops());
  f.Counter(prefix + "ops_total", With(scope, "direction", kPut), c.read_ops());
  f.Counter(prefix + "op_bytes_total", With(scope, "direction", kGet), c.write_bytes());
  f.Counter(prefix + "op_bytes_total", With(scope, "direction", kPut), c.read_bytes());
  for (const v1::ErrorCount& e : c.errors()) {
    f.Counter(prefix + "op_errors_total", With(scope, "code", e.name()), e.count());
  }
  f.Gauge(prefix + "inflight_ops", scope, c.inflight_ops());
  f.Gauge(prefix + "inflight_bytes", scope, c.inflight_bytes());
}

void AddOpFamilies(Families& f, const v1::GetStatsResponse& s) {
  DeclareOpFamilies(f, "gdrstored_", "by the daemon");
  AddOps(f, "gdrstored_", {}, s.total());
  DeclareOpFamilies(f, "gdrstored_transport_", "per transport");
  for (const v1::TransportStats& t : s.transports()) {
    AddOps(f, "gdrstored_transport_", {{"transport", TransportName(t.transport())}}, t.ops());
  }
  DeclareOpFamilies(f, "gdrstored_volume_", "per volume");
  f.Declare("gdrstored_volume_page_locked_bytes", MetricType::Gauge,
            "Bytes of the volume page-locked for the local transport's GPU copies");
  for (const v1::VolumeStats& v : s.volumes()) {
    AddOps(f, "gdrstored_volume_", {{"volume", v.name()}}, v.ops());
    f.Gauge("gdrstored_volume_page_locked_bytes", {{"volume", v.name()}}, v.page_locked_bytes());
  }
  DeclareOpFamilies(f, "gdrstored_client_",
                    "per client (credential label, else IP address; the first 64, then "
                    "\"~other\")");
  for (const v1::ClientStats& c : s.clients()) {
    AddOps(f, "gdrstored_client_", {{"client", c.client()}}, c.ops());
  }
}

void AddPoolFamilies(Families& f, const v1::GetStatsResponse& s) {
  f.Declare("gdrstored_pool_in_use", MetricType::Gauge,
            "Initiator pool entries in use: links (tcp), QPs (rc), DCIs (dc)");
  f.Declare("gdrstored_pool_capacity", MetricType::Gauge, "Initiator pool size");
  f.Declare("gdrstored_pool_destinations", MetricType::Gauge,
            "Clients the pool holds connections to");
  f.Declare("gdrstored_pool_waiting_ops", MetricType::Gauge, "Ops waiting for a pool entry");
  f.Declare("gdrstored_pool_handovers_total", MetricType::Counter,
            "Pool entries handed from one client to another that waited");
  f.Declare("gdrstored_transport_failures_total", MetricType::Counter,
            "Transport failures: links failed (tcp), QP errors (rc), DCI "
            "errors (dc)");
  f.Declare("gdrstored_transport_recoveries_total", MetricType::Counter,
            "QPs, DCIs or streams brought back into service after an error");
  for (const v1::TransportStats& t : s.transports()) {
    if (!t.has_pool()) continue;
    const Labels l = {{"transport", TransportName(t.transport())}};
    const v1::PoolStats& p = t.pool();
    f.Gauge("gdrstored_pool_in_use", l, p.in_use());
    f.Gauge("gdrstored_pool_capacity", l, p.capacity());
    f.Gauge("gdrstored_pool_destinations", l, p.destinations());
    f.Gauge("gdrstored_pool_waiting_ops", l, p.waiting_ops());
    f.Counter("gdrstored_pool_handovers_total", l, p.handovers());
    f.Counter("gdrstored_transport_failures_total", l, p.errors());
    f.Counter("gdrstored_transport_recoveries_total", l, p.recoveries());
  }
}

void AddRailFamilies(Families& f, const v1::GetStatsResponse& s) {
  f.Declare("gdrstored_rail_ops_total", MetricType::Counter,
            "Ops completed on the rail (RDMA device port), both directions");
  f.Declare("gdrstored_rail_op_bytes_total", MetricType::Counter,
            "Bytes of the ops completed on the rail");
  f.Declare("gdrstored_rail_op_errors_total", MetricType::Counter, "Ops that failed on the rail");
  f.Declare("gdrstored_rail_refused_ops_total", MetricType::Counter,
            "Ops refused because the rail was not serving");
  f.Declare("gdrstored_rail_down_events_total", MetricType::Counter,
            "Times the rail's port left ACTIVE");
  f.Declare("gdrstored_rail_serving", MetricType::Gauge,
            "1 while the rail takes new work (its port is ACTIVE), else 0");
  for (const v1::RailStats& r : s.rails()) {
    const Labels l = {{"rail", r.device()}};
    f.Counter("gdrstored_rail_ops_total", l, r.ops());
    f.Counter("gdrstored_rail_op_bytes_total", l, r.bytes());
    f.Counter("gdrstored_rail_op_errors_total", l, r.errors());
    f.Counter("gdrstored_rail_refused_ops_total", l, r.refused());
    f.Counter("gdrstored_rail_down_events_total", l, r.down_events());
    f.Gauge("gdrstored_rail_serving", l, r.serving() ? 1 : 0);
  }
}

void AddFaultFamilies(Families& f, const v1::GetStatsResponse& s) {
  f.Declare("gdrstored_faults_injected_total", MetricType::Counter,
            "Hits of injected faults (gdrctl fault, --fault) since start, by kind and volume "
            "(rail-down: by rail)");
  for (const v1::FaultStats& x : s.faults()) {
    f.Counter("gdrstored_faults_injected_total",
              {{"kind", x.kind()},
               x.rail().empty() ? Labels::value_type{"volume", x.volume()}
                                : Labels::value_type{"rail", x.rail()}},
              x.hits());
  }
}

void AddTraceFamilies(Families& f, const v1::GetStatsResponse& s) {
  if (!s.has_trace()) return;
  f.Declare("gdrstored_trace_records_total", MetricType::Counter,
            "Ops written to the --trace file since start");
  f.Declare("gdrstored_trace_dropped_total", MetricType::Counter,
            "Ops not written to the --trace file (cap reached, queue full, write failed)");
  f.Counter("gdrstored_trace_records_total", {}, s.trace().records());
  f.Counter("gdrstored_trace_dropped_total", {}, s.trace().dropped());
}

void AddDaemonFamilies(Families& f, const v1::GetStatsResponse& s) {
  f.Declare("gdrstored_build_info", MetricType::Gauge, "Always 1; the daemon's version");
  f.Gauge("gdrstored_build_info", {{"version", s.version()}}, 1);
  f.Declare("gdrstored_uptime_seconds", MetricType::Gauge, "Seconds since the daemon started");
  f.Gauge("gdrstored_uptime_seconds", {}, static_cast<double>(s.uptime_ns()) / 1e9);
  f.Declare("gdrstored_reloads_total", MetricType::Counter, "SIGHUP reloads applied");
  f.Counter("gdrstored_reloads_total", {}, s.reloads());
  const v1::AdmissionStats& a = s.admission();
  f.Declare("gdrstored_admission_inflight_ops", MetricType::Gauge,
            "Ops holding an admission permit");
  f.Gauge("gdrstored_admission_inflight_ops", {}, a.inflight_ops());
  f.Declare("gdrstored_admission_max_inflight_ops", MetricType::Gauge,
            "Admission limit on ops in flight (--max-inflight-ops)");
  f.Gauge("gdrstored_admission_max_inflight_ops", {}, a.max_inflight_ops());
  f.Declare("gdrstored_admission_inflight_bytes", MetricType::Gauge,
            "Bytes of the ops holding an admission permit");
  f.Gauge("gdrstored_admission_inflight_bytes", {}, a.inflight_bytes());
  f.Declare("gdrstored_admission_max_inflight_bytes", MetricType::Gauge,
            "Admission limit on bytes in flight (--max-inflight-bytes)");
  f.Gauge("gdrstored_admission_max_inflight_bytes", {}, a.max_inflight_bytes());
  f.Declare("gdrstored_open_streams", MetricType::Gauge, "Stream calls open");
  f.Gauge("gdrstored_open_streams", {}, a.open_streams());
}

// A histogram sample of `h`: cumulative counts at each power of two of
// nanoseconds from 2^10 (bucket 0's bound) to 2^37; LatencyHistogram's bucket
// 8k ends at 2^(10+k) ns exactly.
ClientMetric Histogram(const LatencyHistogram& h, Labels labels) {
  ClientMetric m;
  m.label = std::move(labels);
  uint64_t seen = 0;
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    seen += h.bucket_count(b);
    if (b % LatencyHistogram::kSubBuckets == 0 && b + 1 < LatencyHistogram::kBuckets) {
      m.histogram.bucket.push_back(
          {seen, static_cast<double>(LatencyHistogram::BucketUpperNs(b)) / 1e9});
    }
  }
  // The count is the buckets' sum, so +Inf and _count agree however ops race
  // the scrape.
  m.histogram.bucket.push_back({seen, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = seen;
  m.histogram.sample_sum = static_cast<double>(h.sum_ns()) / 1e9;
  return m;
}

void AddLatency(Families& f, const std::string& name, const Labels& scope, const OpCounters& c) {
  f.Add(name, Histogram(c.latency(Direction::kStoreToClient), With(scope, "direction", kGet)));
  f.Add(name, Histogram(c.latency(Direction::kClientToStore), With(scope, "direction", kPut)));
}

}  // namespace

std::vector<MetricFamily> StatsMetricFamilies(const v1::GetStatsResponse& stats) {
  Families f;
  AddOpFamilies(f, stats);
  AddPoolFamilies(f, stats);
  AddRailFamilies(f, stats);
  AddDaemonFamilies(f, stats);
  AddFaultFamilies(f, stats);
  AddTraceFamilies(f, stats);
  // Each further part of GetStatsResponse gets its own Add...Families(f, stats) here.
  return f.Take();
}

std::vector<MetricFamily> LatencyMetricFamilies(const DaemonStats& stats) {
  const std::string help =
      "Daemon-side latency of successful ops (accept to "
      "completion, media timing included), "
      "by direction";
  Families f;
  f.Declare("gdrstored_op_duration_seconds", MetricType::Histogram, help);
  AddLatency(f, "gdrstored_op_duration_seconds", {}, stats.total());
  f.Declare("gdrstored_transport_op_duration_seconds", MetricType::Histogram,
            help + ", per transport");
  for (TransportKind k : kTransportKinds) {
    AddLatency(f, "gdrstored_transport_op_duration_seconds", {{"transport", TransportName(k)}},
               stats.transport(k));
  }
  f.Declare("gdrstored_volume_op_duration_seconds", MetricType::Histogram, help + ", per volume");
  for (const auto& [name, c] : stats.volumes()) {
    AddLatency(f, "gdrstored_volume_op_duration_seconds", {{"volume", name}}, *c);
  }
  return f.Take();
}

}  // namespace gdr
