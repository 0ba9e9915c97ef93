// The Prometheus endpoint of gdrstored (--metrics-listen): an HTTP server
// (prometheus-cpp's Exposer on civetweb) whose /metrics is built at each scrape
// from the daemon's statistics (daemon/observe/stats_metrics.h). Off unless an
// address is given.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/observe/stats.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace gdr {

// civetweb workers serving /metrics, and how long one waits for a connection's whole request
// (and for a slow reader to take the answer) before closing it: idle or slow connections can
// hold a worker only this long, well inside Prometheus' 10 s scrape timeout.
inline constexpr int kMetricsWorkers = 16;
inline constexpr absl::Duration kMetricsRequestTimeout = absl::Seconds(3);

// The civetweb options the exporter starts prometheus::Exposer with for `address`.
std::vector<std::string> ExposerOptions(const std::string& address);

// OK when `address` is IPV4:PORT or [IPV6]:PORT with PORT in 0..65535 (0: any
// free port); otherwise INVALID_ARGUMENT naming --metrics-listen and the text.
// Host names are refused: the endpoint binds exactly where it is told.
absl::Status CheckMetricsListen(absl::string_view address);

class MetricsExporter {
 public:
  // What a scrape reads: the daemon's GetStats answer as its operator sees it
  // (every volume and client); not OK: the scrape answers no family. Runs on a
  // civetweb thread; must only read atomics and small maps, as GetStats does.
  using StatsSource = std::function<absl::Status(gdrstore::v1::GetStatsResponse*)>;
  // Serves /metrics on `address` (CheckMetricsListen's form) from `source` and
  // `stats`' latency buckets; what they read must outlive the exporter.
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE naming
  // --metrics-listen when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> Start(const std::string& address,
                                                                StatsSource source,
                                                                const DaemonStats* stats);
  // Stops serving; a scrape in progress completes first.
  ~MetricsExporter();

  // The bound port (the chosen one when the address said 0).
  uint16_t port() const { return port_; }

 private:
  MetricsExporter() = default;
  // Declared before the server, which holds it weakly, so the server stops
  // first.
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_ = 0;
};

}  // namespace gdr
