// StoreService::GetStats: the op accounting of DaemonStats plus live pool, admission and media
// figures. Answered inline: it only reads atomics and small maps.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/service/store_service.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

void FillMedia(const MediaModel& m, v1::MediaTiming* out) {
  const MediaSettings s = m.settings();
  out->set_latency_us(s.latency_us);
  out->set_bandwidth_bytes_per_sec(s.bandwidth);
  out->set_preset(s.preset);
  out->set_p99_us(s.p99_us);
  out->set_read_bandwidth_bytes_per_sec(s.read_bandwidth);
  out->set_write_bandwidth_bytes_per_sec(s.write_bandwidth);
  out->set_iops(s.iops);
  out->set_read_iops(s.read_iops);
  out->set_write_iops(s.write_iops);
  out->set_queue_depth(s.queue_depth);
  out->set_seed(s.seed);
  const MediaCounters c = m.counters(absl::Now());
  out->set_ops(c.ops);
  out->set_queued_ops(c.queued_ops);
  out->set_queue_wait_us(c.wait_ns / 1000);
  out->set_in_device(c.in_device);
}

}  // namespace

grpc::ServerUnaryReactor* StoreService::GetStats(grpc::CallbackServerContext* ctx,
                                                 const v1::GetStatsRequest* request,
                                                 v1::GetStatsResponse* response) {
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  auto* reactor = ctx->DefaultReactor();
  if (extras_.stats == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "statistics are not collected by this daemon"));
    return reactor;
  }
  (void)FillStats(caller, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::Status StoreService::FillStats(const Caller& caller, v1::GetStatsResponse* response) const {
  if (extras_.stats == nullptr) {
    return absl::FailedPreconditionError("statistics are not collected by this daemon");
  }
  response->set_version(GDR_VERSION);
  extras_.stats->Fill(response);
  // Per-volume figures only of the volumes the caller has a grant on (the totals, per
  // transport figures and admission stay daemon-wide).
  auto* volumes = response->mutable_volumes();
  volumes->erase(std::remove_if(volumes->begin(), volumes->end(),
                                [&caller](const v1::VolumeStats& v) {
                                  return !caller.MaySee(v.name());
                                }),
                 volumes->end());
  // A caller with a credential sees its own client entry only: the others' labels and
  // traffic are theirs.
  if (!caller.label().empty()) {
    auto* clients = response->mutable_clients();
    clients->erase(std::remove_if(clients->begin(), clients->end(),
                                  [&caller](const v1::ClientStats& c) {
                                    return c.client() != caller.label();
                                  }),
                   clients->end());
  }
  transports_->FillStats(response);
  if (extras_.faults != nullptr) {
    extras_.faults->FillStats(response);
    // As for volumes: fault counts of volumes the caller may not see are left out.
    auto* faults = response->mutable_faults();
    faults->erase(std::remove_if(faults->begin(), faults->end(),
                                 [&caller](const v1::FaultStats& f) {
                                   return !f.volume().empty() && !caller.MaySee(f.volume());
                                 }),
                  faults->end());
  }
  for (v1::VolumeStats& v : *response->mutable_volumes()) {
    if (extras_.media == nullptr) continue;
    if (MediaModel* m = extras_.media->Find(v.name())) FillMedia(*m, v.mutable_media());
  }
  const ServiceLimits limits = this->limits();
  v1::AdmissionStats* a = response->mutable_admission();
  a->set_inflight_ops(limiter_.ops());
  a->set_max_inflight_ops(limits.max_inflight_ops);
  a->set_inflight_bytes(limiter_.bytes());
  a->set_max_inflight_bytes(limits.max_inflight_bytes);
  a->set_open_streams(streams_.load());
  if (extras_.trace != nullptr) {
    const TraceRecorder::Stats t = extras_.trace->stats();
    v1::TraceStats* ts = response->mutable_trace();
    ts->set_records(t.records);
    ts->set_dropped(t.dropped);
    ts->set_bytes(t.bytes);
    ts->set_file(t.file);
  }
  return absl::OkStatus();
}

}  // namespace gdr
