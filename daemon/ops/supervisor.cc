#include "daemon/ops/supervisor.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/units.h"
#include "common/grpc/in_process_ping.h"
#include "common/process/file_watcher.h"
#include "common/process/health_monitor.h"
#include "common/process/service_loop.h"
#include "daemon/ops/reload.h"

namespace gdr {
namespace {

std::string Bytes(uint64_t b) {
  if (b >= 1'000'000'000) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1'000'000) return absl::StrFormat("%.1f MB", b / 1e6);
  if (b >= 1'000) return absl::StrFormat("%.1f kB", b / 1e3);
  return absl::StrCat(b, " B");
}

std::string Describe(const VolumeSpec& v) {
  return absl::StrCat(FormatSize(v.size), v.file.empty() ? std::string(", memory")
                                                         : absl::StrCat(", file ", v.file));
}

// The configuration's volumes that came or went: deleted first (a volume renamed frees its
// memory before the new one needs it), then made, each through the catalog as Admin
// DeleteVolume / CreateVolume do, its files kept. `plan.effective` follows what was done; a
// volume refused stays as it was and is named in `refused`; the others go on.
void ApplyVolumes(SupervisedDaemon& d, ReloadPlan& plan, std::vector<std::string>* refused) {
  std::vector<VolumeSpec>& volumes = plan.effective.volumes;
  for (const std::string& name : plan.volumes_removed) {
    if (d.volumes == nullptr) {
      plan.needs_restart.push_back(absl::StrCat("volume ", name, ": removed"));
      continue;
    }
    absl::Status s = d.volumes->DeleteConfigured(name, "SIGHUP");
    // NOT_FOUND: deleted at run time already (Admin DeleteVolume).
    if (!s.ok() && !absl::IsNotFound(s)) {
      refused->push_back(absl::StrCat("volume ", name, ": not removed: ", s.message()));
      continue;
    }
    plan.applied.push_back(absl::StrCat("volume ", name, ": removed"));
    volumes.erase(std::remove_if(volumes.begin(), volumes.end(),
                                 [&](const VolumeSpec& v) { return v.name == name; }),
                  volumes.end());
  }
  for (const VolumeSpec& spec : plan.volumes_added) {
    if (d.volumes == nullptr) {
      plan.needs_restart.push_back(absl::StrCat("volume ", spec.name, ": added"));
      continue;
    }
    // A volume made at run time in the writable --volume-dir: the directory's scan finds its
    // file, and it is that volume already.
    if (std::shared_ptr<const Volume> v = d.store->Find(spec.name);
        v != nullptr && !spec.file.empty() && v->file() == spec.file) {
      volumes.push_back(spec);
      continue;
    }
    absl::StatusOr<VolumeCatalog::Made> made = d.volumes->CreateConfigured(spec, "SIGHUP");
    if (!made.ok()) {
      refused->push_back(absl::StrCat("volume ", spec.name, " (", Describe(spec),
                                      "): not added: ", made.status().message()));
      continue;
    }
    plan.applied.push_back(absl::StrCat("volume ", spec.name, ": added (", Describe(spec), ")"));
    volumes.push_back(spec);
  }
}

// Applies what can change live; logs what needs a restart. `why` ("SIGHUP", "PATH changed")
// starts each log line. Callers hold the reload lock (ServeUntilStopped).
void Reload(SupervisedDaemon& d, const std::string& why) {
  absl::StatusOr<DaemonConfig> next = ParseDaemonConfig(d.argc, d.argv);
  if (!next.ok()) {
    GDR_LOG(kError) << why << ": configuration not reloaded, keeping the running one: "
                    << next.status().message();
    return;
  }
  ReloadPlan plan = PlanReload(d.config, *next);
  d.service->UpdateLimits(plan.effective.limits);
  d.service->SetTokens(plan.effective.tokens);
  // Certificates are read again even when no path changed (the files may have); a set that
  // does not check out is refused with its own log line and the served one stays.
  if (d.tls != nullptr && plan.effective.tls.enabled()) {
    d.tls->Reload(plan.effective.tls, why).IgnoreError();
  }
  SetLogLevel(plan.effective.log_level);
  if (d.trace != nullptr) d.trace->Reopen();  // log rotation: the old file was moved away
  if (d.media != nullptr) {
    for (const VolumeSpec& v : plan.effective.volumes) {
      if (std::shared_ptr<MediaModel> m = d.media->Find(v.name)) m->Set(v.media);
    }
  }
  if (d.faults != nullptr) {
    if (absl::Status s = d.faults->ReplaceConfigured(plan.effective.faults.specs); !s.ok()) {
      GDR_LOG(kError) << why << ": a fault rule of the configuration was not set: " << s;
    }
  }
  std::vector<std::string> refused;
  ApplyVolumes(d, plan, &refused);
  d.config = plan.effective;
  if (d.stats != nullptr) d.stats->CountReload();
  if (!refused.empty()) {
    GDR_LOG(kError) << why << ": refused: " << absl::StrJoin(refused, "; ");
  }
  if (plan.applied.empty()) {
    GDR_LOG(kInfo) << why << ": configuration re-read; no live setting changed";
  } else {
    GDR_LOG(kInfo) << why << ": applied " << absl::StrJoin(plan.applied, "; ");
  }
  if (!plan.needs_restart.empty()) {
    GDR_LOG(kWarning) << why << ": NOT applied (needs a restart): "
                      << absl::StrJoin(plan.needs_restart, "; ");
  }
}

// A watcher of the files `d` serves credentials from (the token file, the TLS files), calling
// `reload` when one changes; null when there are none or inotify is refused (logged: SIGHUP
// still re-reads them).
std::unique_ptr<FileWatcher> WatchCredentials(const SupervisedDaemon& d,
                                              FileWatcher::OnChange reload) {
  const TlsSettings& tls = d.config.tls;
  std::vector<std::string> paths = {d.config.token_file, tls.cert, tls.key, tls.client_ca};
  if (std::all_of(paths.begin(), paths.end(), [](const std::string& p) { return p.empty(); })) {
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<FileWatcher>> w = FileWatcher::Start(paths, std::move(reload));
  if (!w.ok()) {
    GDR_LOG(kWarning) << "token and TLS files not watched (re-read on SIGHUP only): "
                      << w.status().message();
    return nullptr;
  }
  return *std::move(w);
}

}  // namespace

std::string StatusLine(const SupervisedDaemon& d) {
  std::string s = d.serving;
  const uint32_t clients = d.transports != nullptr ? d.transports->clients() : 0;
  absl::StrAppend(&s, "; ", clients, clients == 1 ? " client, " : " clients, ",
                  d.service->inflight_ops(), " ops in flight");
  if (d.stats != nullptr) {
    const OpCounters& t = d.stats->total();
    const uint64_t w = t.bytes(Direction::kStoreToClient);
    const uint64_t r = t.bytes(Direction::kClientToStore);
    const uint64_t ops = t.ops(Direction::kStoreToClient) + t.ops(Direction::kClientToStore);
    uint64_t errors = 0;
    for (int c = 1; c < OpCounters::kCodes; ++c) errors += t.errors(static_cast<absl::StatusCode>(c));
    absl::StrAppend(&s, ", moved ", Bytes(w + r), " (to clients ", Bytes(w), ", to store ",
                    Bytes(r), ") in ", ops, " ops, ", errors, " errors");
  }
  return s;
}

int ServeUntilStopped(SupervisedDaemon& d, const sigset_t& signals) {
  const SystemdNotifier& notifier = *d.notifier;
  // Under a watchdog, ping at half its timeout; otherwise just keep STATUS= fresh.
  const absl::Duration period = HealthMonitor::PeriodFor(notifier);
  // A loop that should come round every 100 ms is stuck when it has not for this long.
  const absl::Duration max_stall = std::max(period, absl::Milliseconds(500));
  HealthMonitor monitor(&notifier, period, [&d] { return StatusLine(d); });
  if (d.transports != nullptr) {
    monitor.AddProbe("transport",
                     [&d, max_stall] { return d.transports->CheckHealth(max_stall); });
  }
  if (d.delays != nullptr) {
    monitor.AddProbe("media timing", [&d, max_stall] { return d.delays->CheckHealth(max_stall); });
  }
  monitor.AddProbe("grpc server", InProcessPing(d.server, std::min(period / 2, absl::Seconds(2)),
                                                [&d] { return d.service->InternalToken(); }));
  ServiceLoop loop;
  loop.notifier = &notifier;
  loop.status_line = [&d] { return StatusLine(d); };
  // Kubernetes updates a mounted Secret without a signal: a change of the token or TLS files
  // reloads as SIGHUP does (same checks; a file that does not pass keeps the running set).
  absl::Mutex reload_mu;
  loop.reload = [&] {
    absl::MutexLock lock(&reload_mu);
    Reload(d, "SIGHUP");
  };
  std::unique_ptr<FileWatcher> watcher =
      WatchCredentials(d, [&](const std::vector<std::string>& changed) {
        absl::MutexLock lock(&reload_mu);
        const std::string& tokens = d.config.token_file;
        if (std::find(changed.begin(), changed.end(), tokens) != changed.end()) {
          Reload(d, absl::StrCat(tokens, " changed"));
        } else if (d.tls != nullptr && d.config.tls.enabled()) {
          // TLS files alone: the certificates only, as the reloader's own check of them does.
          d.tls->Reload(d.config.tls, "file change").IgnoreError();
        }
      });
  const int sig = ServeUntilStopSignal(loop, &monitor, signals);
  watcher.reset();
  GDR_LOG(kInfo) << SignalName(sig) << ": draining (" << d.service->inflight_ops()
                 << " ops in flight, " << d.service->open_streams() << " streams open, up to "
                 << absl::FormatDuration(d.config.drain_timeout) << ")";
  return Drain(d);
}

int Drain(SupervisedDaemon& d) {
  const SystemdNotifier& notifier = *d.notifier;
  notifier.Stopping(absl::StrCat("draining ", d.service->inflight_ops(), " ops in flight (up to ",
                                 absl::FormatDuration(d.config.drain_timeout), ")"));
  d.server->GetHealthCheckService()->SetServingStatus(false);
  d.service->StartDrain();
  if (d.transports != nullptr) d.transports->StartDrain();
  const absl::Time drain_deadline = absl::Now() + d.config.drain_timeout;
  // Server::Shutdown cancels the calls still running at the deadline, but a callback call only
  // ends once its reactor finishes, and ours finish when their transport op completes. An op
  // stuck on a target that never answers would hold Shutdown until the op timeout. So at the
  // deadline the transports fail everything still on the links (CANCELLED) and the media delay
  // queue answers what it holds early, which finishes those calls and lets Shutdown return.
  absl::Notification drained;
  std::thread canceller([&] {
    if (drained.WaitForNotificationWithDeadline(drain_deadline)) return;
    GDR_LOG(kWarning) << "drain deadline reached with " << d.service->inflight_ops()
                      << " ops in flight; cancelling them";
    if (d.transports != nullptr) d.transports->Shutdown();
    if (d.delays != nullptr) d.delays->Shutdown();
  });
  // Stops accepting calls, lets running ones finish until the deadline, then cancels the rest.
  d.server->Shutdown(absl::ToChronoTime(drain_deadline));
  d.server->Wait();
  drained.Notify();
  canceller.join();
  // Anything a cancelled call left on the links fails now; the links close. Idempotent.
  if (d.transports != nullptr) d.transports->Shutdown();
  if (d.delays != nullptr) d.delays->Shutdown();
  if (d.syncer != nullptr) d.syncer->Shutdown();
  // A clean stop leaves file-backed volumes durable, not only in the page cache.
  for (const std::shared_ptr<const Volume>& v : d.store->Volumes()) {
    if (v->file().empty() || v->read_only()) continue;
    if (absl::Status s = v->Sync(0, v->size()); !s.ok()) {
      GDR_LOG(kError) << "volume " << v->name() << ": " << s.message();
    }
  }
  GDR_LOG(kInfo) << "stopped cleanly; " << StatusLine(d);
  return 0;
}

}  // namespace gdr
