#include "daemon/observe/metrics_exporter.h"

#include <exception>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/ip_address.h"
#include "common/base/status_macros.h"
#include "daemon/observe/stats_metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace gdr {
namespace {

class StatsCollectable final : public prometheus::Collectable {
 public:
  StatsCollectable(MetricsExporter::StatsSource source, const DaemonStats* stats)
      : source_(std::move(source)), stats_(stats) {}

  // Runs on a civetweb thread per scrape: reads only atomics and small maps, as
  // GetStats does.
  std::vector<prometheus::MetricFamily> Collect() const override {
    gdrstore::v1::GetStatsResponse response;
    if (!source_(&response).ok()) return {};
    std::vector<prometheus::MetricFamily> out = StatsMetricFamilies(response);
    for (prometheus::MetricFamily& f : LatencyMetricFamilies(*stats_)) {
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  const MetricsExporter::StatsSource source_;
  const DaemonStats* stats_;
};

}  // namespace

std::vector<std::string> ExposerOptions(const std::string& address) {
  // civetweb serves each connection on one worker thread from the moment it is accepted until
  // the request is answered, and waits up to request_timeout_ms (30 s by default) for the
  // request to arrive. With prometheus-cpp's default of 2 workers, two idle or half-sent
  // requests held the endpoint for 30 s and Prometheus (10 s scrape timeout) marked the
  // target down. Enough workers that a handful of stray connections leaves one free, and a
  // request timeout far below the scrape timeout, so that even a flood of idle connections
  // delays a scrape by a few seconds per kMetricsWorkers of them rather than 30 s per 2. The
  // timeout covers the whole request (civetweb measures from its start), so a peer trickling
  // a byte at a time is cut off too, and writes of the answer (a reader that never reads).
  // No keep-alive: an idle kept-alive connection would hold a worker between scrapes.
  return {"listening_ports",
          address,
          "num_threads",
          std::to_string(kMetricsWorkers),
          "request_timeout_ms",
          std::to_string(absl::ToInt64Milliseconds(kMetricsRequestTimeout)),
          "enable_keep_alive",
          "no"};
}

absl::Status CheckMetricsListen(absl::string_view address) {
  auto bad = [address](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: bad address '", address, "': ", why,
                     " (want IPV4:PORT or [IPV6]:PORT, PORT 0..65535, 0 = any free port)"));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  absl::string_view host = address.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port > 65535) {
    return bad("port not a number in 0..65535");
  }
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  absl::StatusOr<IpAddress> ip = IpAddress::Parse(host);
  if (!ip.ok()) return bad("the host is not an IP address");
  const bool v6 = host.find(':') != absl::string_view::npos;
  if (v6 != bracketed) return bad(v6 ? "an IPv6 address needs brackets" : "brackets around IPv4");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(const std::string& address,
                                                                        StatsSource source,
                                                                        const DaemonStats* stats) {
  GDR_RETURN_IF_ERROR(CheckMetricsListen(address));
  std::unique_ptr<MetricsExporter> e(new MetricsExporter());
  e->collectable_ = std::make_shared<StatsCollectable>(std::move(source), stats);
  // civetweb reports a failed bind by an exception through prometheus-cpp; it
  // stops here.
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(ExposerOptions(address));
  } catch (const std::exception& ex) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen: cannot serve on ", address,
                                               " (address in use or not local?): ", ex.what()));
  }
  e->exposer_->RegisterCollectable(e->collectable_);
  const std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0 || ports[0] > 65535) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: ", address, " gave no listening port"));
  }
  e->port_ = static_cast<uint16_t>(ports[0]);
  return e;
}

MetricsExporter::~MetricsExporter() = default;

}  // namespace gdr
