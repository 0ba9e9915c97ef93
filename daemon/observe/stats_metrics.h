// gdrstored's statistics as Prometheus metric families, built at scrape time
// from what the daemon already counts (GetStatsResponse, and DaemonStats'
// latency buckets), so the op path carries no metrics code of its own.
// docs/simulation.md ("Prometheus metrics") lists them.
#pragma once

#include <vector>

#include "daemon/observe/stats.h"
#include "gdrstore/v1/gdrstore.pb.h"
#include "prometheus/metric_family.h"

namespace gdr {

// Counters and gauges of one GetStats answer: per daemon, transport, volume and
// client (ops, bytes, errors by code, in flight), pools, rails, admission,
// uptime, reloads. Every family is present even when it has no sample yet, so
// dashboards and alerts can name it. Pure.
std::vector<prometheus::MetricFamily> StatsMetricFamilies(
    const gdrstore::v1::GetStatsResponse& stats);

// Latency histograms of successful ops (gdrstored_*op_duration_seconds), per
// daemon, transport and volume by direction, from DaemonStats' log-linear
// buckets taken at every power of two from 1.024 us to 137 s (exact: those are
// bucket boundaries). Thread-safe.
std::vector<prometheus::MetricFamily> LatencyMetricFamilies(const DaemonStats& stats);

}  // namespace gdr
