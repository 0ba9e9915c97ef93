#include "daemon/ops/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/base/units.h"

namespace gdr {
namespace {

// Write-then-rename so a reader never sees a partial number.
void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    GDR_LOG(kError) << "cannot write port file " << path;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonConfig config, int argc,
                                                       char** argv) {
  std::unique_ptr<Daemon> d(new Daemon(std::move(config)));
  d->argc_ = argc;
  d->argv_ = argv;
  GDR_RETURN_IF_ERROR(d->MakeStore());
  GDR_RETURN_IF_ERROR(d->MakeTransports());
  GDR_RETURN_IF_ERROR(d->MakeSimulation());
  GDR_RETURN_IF_ERROR(d->MakeService());
  GDR_RETURN_IF_ERROR(d->Serve());
  GDR_RETURN_IF_ERROR(d->JoinCluster());
  d->notifier_ = SystemdNotifier::FromEnvironment();
  SupervisedDaemon& s = d->supervised_;
  s.argc = argc;
  s.argv = argv;
  s.config = d->config_;
  s.server = d->server_.get();
  s.service = d->service_.get();
  s.store = d->store_.get();
  s.transports = d->transports_.get();
  s.delays = d->delays_.get();
  s.syncer = d->syncer_.get();
  s.media = d->media_.get();
  s.faults = d->faults_.get();
  s.stats = d->stats_.get();
  s.volumes = d->volumes_.get();
  s.notifier = d->notifier_.get();
  s.tls = d->tls_.get();
  s.trace = d->trace_.get();
  s.serving = absl::StrCat("serving on ", d->config_.listen, " (port ", d->port_,
                           "), transports ", d->transports_->Names());
  return d;
}

Daemon::~Daemon() { Stop(); }

absl::Status Daemon::MakeStore() {
  const absl::Time t0 = absl::Now();
  // The store starts with no volume: the catalog makes every one, the configuration's as it
  // makes them on SIGHUP or CreateVolume (counters, media model, the cluster hook). They come
  // before the transports, which register the store's volumes as they start (a GPU host's
  // local transport locks those in the background rather than on the making thread).
  GDR_ASSIGN_OR_RETURN(store_, Store::Create({}));
  stats_ = std::make_unique<DaemonStats>(std::vector<std::string>{});
  media_ = std::make_unique<MediaTiming>(std::map<std::string, MediaSettings>{});
  delays_ = std::make_unique<DelayQueue>();
  syncer_ = std::make_unique<SyncWorker>();
  VolumeCatalogOptions vo;
  vo.max_volumes = config_.max_volumes;
  // Until the daemon joins its cluster the hook finds no entry to update.
  vo.volumes_changed = [this] { VolumesChanged(); };
  for (const VolumeDir& d : config_.volume_dirs) {
    if (d.writable) vo.writable_dir = d;
  }
  volumes_ = std::make_unique<VolumeCatalog>(store_.get(), media_.get(), stats_.get(), vo);
  GDR_RETURN_IF_ERROR(volumes_->CreateAtStart(config_.volumes));
  GDR_LOG(kInfo) << "store ready in " << absl::FormatDuration(absl::Now() - t0);
  return absl::OkStatus();
}

absl::Status Daemon::MakeSimulation() {
  // Fault injection: the configured rules now, more (and clears) through the Admin service.
  faults_ = std::make_unique<FaultInjector>(config_.faults.seed);
  if (rails_ != nullptr) {
    faults_->set_rail_down([rails = rails_.get()](const std::string& rail, absl::Duration d) {
      return rails->ForceDown(rail, d);
    });
  }
  for (const gdrstore::v1::FaultSpec& spec : config_.faults.specs) {
    if (absl::Status s = faults_->Add(spec, "config").status(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--fault: ", s.message()));
    }
  }
  if (!config_.trace.empty()) {
    absl::StatusOr<std::unique_ptr<TraceRecorder>> r =
        TraceRecorder::Create(config_.trace, config_.trace_max_bytes);
    if (!r.ok()) return r.status();
    trace_ = std::move(*r);
    GDR_LOG(kInfo) << "recording ops to trace " << config_.trace << " (up to "
                   << FormatSize(config_.trace_max_bytes) << ")";
  }
  return absl::OkStatus();
}

absl::Status Daemon::MakeService() {
  service_ = std::make_unique<StoreService>(store_.get(), transports_.get(), config_.limits);
  // The op pipeline: the stages the daemon runs, put in kOpStageOrder by their names; a part
  // the daemon does not run (no --trace) is not in it.
  stages_.push_back(std::make_unique<SyncStage>(syncer_.get()));
  stages_.push_back(
      std::make_unique<FaultStage>(faults_.get(), delays_.get(), store_.get(), transports_.get()));
  stages_.push_back(std::make_unique<MediaStage>(media_.get(), delays_.get()));
  stages_.push_back(std::make_unique<StatsStage>(stats_.get()));
  if (trace_ != nullptr) stages_.push_back(std::make_unique<TraceStage>(trace_.get()));
  std::vector<OpStage*> run = service_->stages();
  for (const std::unique_ptr<OpStage>& s : stages_) run.push_back(s.get());
  GDR_ASSIGN_OR_RETURN(std::vector<OpStage*> pipeline, InStageOrder(run));
  service_->SetPipeline(std::move(pipeline));
  service_->set_connect_handler(rc_connect_.get());
  admin_ = std::make_unique<AdminService>(service_.get(), faults_.get(), volumes_.get());
  // san: lines of the token file name client certificates, so they count only when gRPC has
  // verified those against --tls-client-ca (mTLS; switching it needs a restart).
  service_->TrustClientCertificates(config_.tls.enabled() && config_.tls.mutual());
  service_->SetTokens(config_.tokens);
  if (!config_.tokens.empty()) {
    GDR_LOG(kInfo) << "token authentication on: " << DescribeCredentials(config_.tokens)
                   << " accepted from " << config_.token_file;
    struct stat st {};
    if (::stat(config_.token_file.c_str(), &st) == 0 && (st.st_mode & 0077) != 0) {
      GDR_LOG(kWarning) << "token file " << config_.token_file
                        << " is readable by group or others (mode "
                        << absl::StrFormat("%04o", st.st_mode & 07777) << "); chmod 600 it";
    }
  }
  return absl::OkStatus();
}

absl::Status Daemon::Serve() {
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (config_.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<TlsReloader>> reloader = TlsReloader::Create(config_.tls);
    if (!reloader.ok()) return reloader.status();
    tls_ = std::move(*reloader);
    credentials = tls_->credentials();
    service_->set_tls_info([tls = tls_.get()] { return tls->Info(); });
    tls_->StartWatching(absl::Seconds(1));
    GDR_LOG(kInfo) << tls_->Describe() << "; files re-read when they change and on SIGHUP";
  } else if (!IsLoopbackListen(config_.listen) && config_.token_file.empty()) {
    GDR_LOG(kWarning) << "--insecure: serving " << config_.listen
                      << " with neither TLS nor tokens; anyone who reaches it may read and "
                         "write every volume";
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen, credentials, &port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(admin_.get());
  builder.SetMaxReceiveMessageSize(1 << 20);  // control messages only; data never rides gRPC
  // A client host that vanishes without closing its connection is noticed by keepalive, which
  // ends its Connect call and so frees its RC QPs.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config_.listen, " (address in use or not local?)"));
  }
  server_->GetHealthCheckService()->SetServingStatus(true);
  GDR_LOG(kInfo) << "gdrstored " << GDR_VERSION << " serving gdrstore.v1 on " << config_.listen
                 << " (port " << port_ << "), transports: " << transports_->Names();
  // After the gRPC server, whose port file tells a test the daemon is up: by then the metrics
  // port file is there too.
  if (!config_.metrics_listen.empty()) {
    StoreService* service = service_.get();
    absl::StatusOr<std::unique_ptr<MetricsExporter>> started = MetricsExporter::Start(
        config_.metrics_listen,
        // A default Caller: the endpoint is the operator's and shows every volume and client.
        [service](gdrstore::v1::GetStatsResponse* out) {
          return service->FillStats(Caller(), out);
        },
        stats_.get());
    if (!started.ok()) return started.status();
    metrics_ = std::move(*started);
    GDR_LOG(kInfo) << "Prometheus metrics on http://" << config_.metrics_listen
                   << "/metrics (port " << metrics_->port() << ")";
    if (!config_.metrics_port_file.empty()) {
      WritePortFile(config_.metrics_port_file, metrics_->port());
    }
  }
  if (!config_.port_file.empty()) WritePortFile(config_.port_file, port_);
  return absl::OkStatus();
}

absl::Status Daemon::JoinCluster() {
  // Registered once serving, so a client that reads the entry finds the port open.
  if (!config_.cluster.enabled()) return absl::OkStatus();
  absl::StatusOr<std::string> address =
      AdvertiseAddress(config_.cluster.advertise, config_.listen, port_);
  if (!address.ok()) return address.status();
  absl::MutexLock lock(&member_mu_);
  member_address_ = *address;
  absl::StatusOr<std::unique_ptr<ClusterMember>> started = ClusterMember::Start(
      config_.cluster.url,
      {config_.cluster.tls_ca, config_.cluster.tls_cert, config_.cluster.tls_key},
      absl::Seconds(config_.cluster.ttl_s), MemberEntry());
  if (!started.ok()) return started.status();
  member_ = std::move(*started);
  return absl::OkStatus();
}

gdrstore::v1::ClusterMember Daemon::MemberEntry() const {
  gdrstore::v1::ClusterMember entry;
  entry.set_id(config_.cluster.id.empty() ? DefaultMemberId(port_) : config_.cluster.id);
  entry.set_address(member_address_);
  for (TransportKind k : kTransportKinds) {
    if (transports_->Find(k) != nullptr) entry.add_transports(TransportName(k));
  }
  for (size_t i = 0; rails_ != nullptr && i < rails_->size(); ++i) {
    entry.add_rails(rails_->rail(i)->name());
  }
  for (const std::shared_ptr<const Volume>& v : store_->Volumes()) {
    auto* vol = entry.add_volumes();
    vol->set_name(v->name());
    vol->set_size(v->size());
  }
  entry.set_version(GDR_VERSION);
  entry.set_registered_unix_ms(absl::ToUnixMillis(absl::Now()));
  return entry;
}

void Daemon::VolumesChanged() {
  absl::MutexLock lock(&member_mu_);
  // Not yet joined: JoinCluster reads the store after this change.
  if (member_ != nullptr) member_->Update(MemberEntry());
}

int Daemon::ServeUntilSignalled(const sigset_t& signals) {
  if (stopped_) return exit_code_;
  stopped_ = true;
  return Stopped(ServeUntilStopped(supervised_, signals));
}

int Daemon::Stop() {
  if (stopped_) return exit_code_;
  stopped_ = true;
  // Started only part way (a start-up failure): the parts made so far go with their owners.
  if (notifier_ == nullptr) return exit_code_;
  return Stopped(Drain(supervised_));
}

int Daemon::Stopped(int code) {
  exit_code_ = code;
  {
    absl::MutexLock lock(&member_mu_);
    if (member_) member_->Stop();  // the entry goes now, not a TTL later
  }
  if (trace_) {
    trace_->Close();  // every op answered by now is in the file
    const TraceRecorder::Stats t = trace_->stats();
    GDR_LOG(kInfo) << "trace " << t.file << ": " << t.records << " ops recorded, " << t.dropped
                   << " dropped";
  }
  return code;
}

}  // namespace gdr
