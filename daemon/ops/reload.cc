#include "daemon/ops/reload.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/units.h"

namespace gdr {
namespace {

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

template <typename T>
void Compare(const std::string& key, const T& a, const T& b, std::vector<std::string>* out) {
  if (a != b) out->push_back(absl::StrCat(key, ": ", a, " -> ", b));
}

void CompareSize(const std::string& key, uint64_t a, uint64_t b, std::vector<std::string>* out) {
  if (a != b) out->push_back(absl::StrCat(key, ": ", FormatSize(a), " -> ", FormatSize(b)));
}

void CompareDuration(const std::string& key, absl::Duration a, absl::Duration b,
                     std::vector<std::string>* out) {
  if (a != b) {
    out->push_back(absl::StrCat(key, ": ", absl::FormatDuration(a), " -> ",
                                absl::FormatDuration(b)));
  }
}

std::string CidrList(const std::vector<Cidr>& list) {
  std::string out;
  for (const Cidr& c : list) absl::StrAppend(&out, out.empty() ? "" : ",", c.ToString());
  return out.empty() ? "(none)" : out;
}

std::string RailList(const std::vector<std::string>& rails) {
  const std::string joined = absl::StrJoin(rails, ",");
  return joined.empty() ? "(automatic)" : joined;
}

}  // namespace

ReloadPlan PlanReload(const DaemonConfig& current, const DaemonConfig& next) {
  ReloadPlan plan;
  plan.effective = current;
  DaemonConfig& eff = plan.effective;

  // Live.
  CompareSize("max-op-size", current.limits.max_op_bytes, next.limits.max_op_bytes, &plan.applied);
  Compare("max-inflight-per-stream", current.limits.max_inflight_per_stream,
          next.limits.max_inflight_per_stream, &plan.applied);
  Compare("max-inflight-ops", current.limits.max_inflight_ops, next.limits.max_inflight_ops,
          &plan.applied);
  CompareSize("max-inflight-bytes", current.limits.max_inflight_bytes,
              next.limits.max_inflight_bytes, &plan.applied);
  eff.limits.max_op_bytes = next.limits.max_op_bytes;
  eff.limits.max_inflight_per_stream = next.limits.max_inflight_per_stream;
  eff.limits.max_inflight_ops = next.limits.max_inflight_ops;
  eff.limits.max_inflight_bytes = next.limits.max_inflight_bytes;
  if (current.log_level != next.log_level) {
    plan.applied.push_back(
        absl::StrCat("log-level: ", LevelName(current.log_level), " -> ", LevelName(next.log_level)));
    eff.log_level = next.log_level;
  }
  CompareDuration("drain-timeout", current.drain_timeout, next.drain_timeout, &plan.applied);
  eff.drain_timeout = next.drain_timeout;
  // Tokens and grants: the file is read again on every reload, so a rotation needs no flag
  // change. Only counts are logged, never a token.
  if (current.token_file != next.token_file || current.tokens != next.tokens) {
    plan.applied.push_back(
        next.tokens.empty()
            ? std::string("tokens: none needed any more")
            : absl::StrCat("tokens: ", DescribeCredentials(current.tokens), " -> ",
                           DescribeCredentials(next.tokens), " accepted, grants re-read (",
                           next.token_file, ")"));
  }
  eff.token_file = next.token_file;
  eff.tokens = next.tokens;
  // TLS: the files are re-read on every reload (TlsReloader) and may move; switching TLS or
  // mTLS on or off changes the listening socket's credentials and needs a restart.
  if (current.tls.enabled() != next.tls.enabled() || current.tls.mutual() != next.tls.mutual()) {
    plan.needs_restart.push_back(absl::StrCat(
        "tls: ", current.tls.enabled() ? (current.tls.mutual() ? "mTLS" : "TLS") : "off", " -> ",
        next.tls.enabled() ? (next.tls.mutual() ? "mTLS" : "TLS") : "off"));
  } else {
    Compare("tls-cert", current.tls.cert, next.tls.cert, &plan.applied);
    Compare("tls-key", current.tls.key, next.tls.key, &plan.applied);
    Compare("tls-client-ca", current.tls.client_ca, next.tls.client_ca, &plan.applied);
    eff.tls = next.tls;
  }

  // Volumes: media timing is live, and so is a volume's existence (the supervisor makes or
  // deletes it); a kept volume's size, file and repeat are not: making it anew would lose its
  // data.
  std::map<std::string, const VolumeSpec*> old_by_name, new_by_name;
  for (const VolumeSpec& v : current.volumes) old_by_name[v.name] = &v;
  for (const VolumeSpec& v : next.volumes) new_by_name[v.name] = &v;
  for (const auto& [name, nv] : new_by_name) {
    auto it = old_by_name.find(name);
    if (it == old_by_name.end()) {
      plan.volumes_added.push_back(*nv);
      continue;
    }
    const VolumeSpec& ov = *it->second;
    if (ov.size != nv->size) {
      plan.needs_restart.push_back(absl::StrCat("volume ", name, " size: ", FormatSize(ov.size),
                                                " -> ", FormatSize(nv->size)));
    }
    if (ov.file != nv->file) {
      plan.needs_restart.push_back(absl::StrCat("volume ", name, " file: '", ov.file, "' -> '",
                                                nv->file, "'"));
    }
    if (ov.repeat != nv->repeat) {
      plan.needs_restart.push_back(absl::StrCat("volume ", name, " repeat: ", ov.repeat, " -> ",
                                                nv->repeat, " bytes"));
    }
    if (ov.media != nv->media) {
      plan.applied.push_back(absl::StrCat("volume ", name, " media: ",
                                          FormatMediaSettings(ov.media), " -> ",
                                          FormatMediaSettings(nv->media)));
      for (VolumeSpec& ev : eff.volumes) {
        if (ev.name == name) ev.media = nv->media;
      }
    }
  }
  for (const auto& [name, ov] : old_by_name) {
    if (new_by_name.count(name) == 0) {
      plan.volumes_removed.push_back(name);
    }
  }

  // Fault rules of the configuration are replaced as a whole; run-time ones stay.
  if (current.faults.texts != next.faults.texts) {
    plan.applied.push_back(absl::StrCat("fault rules: [", absl::StrJoin(current.faults.texts, "; "),
                                        "] -> [", absl::StrJoin(next.faults.texts, "; "), "]"));
    eff.faults.texts = next.faults.texts;
    eff.faults.specs = next.faults.specs;
  }
  Compare("fault-seed", current.faults.seed, next.faults.seed, &plan.needs_restart);

  // Restart only.
  Compare("listen", current.listen, next.listen, &plan.needs_restart);
  Compare("port-file", current.port_file, next.port_file, &plan.needs_restart);
  // SIGHUP reopens the trace at its path (log rotation); another path or cap needs a restart.
  Compare("trace", current.trace, next.trace, &plan.needs_restart);
  CompareSize("trace-max-bytes", current.trace_max_bytes, next.trace_max_bytes,
              &plan.needs_restart);
  Compare("metrics-listen", current.metrics_listen, next.metrics_listen, &plan.needs_restart);
  Compare("metrics-port-file", current.metrics_port_file, next.metrics_port_file,
          &plan.needs_restart);
  Compare("cluster", current.cluster.url, next.cluster.url, &plan.needs_restart);
  Compare("cluster-ttl", current.cluster.ttl_s, next.cluster.ttl_s, &plan.needs_restart);
  Compare("cluster-id", current.cluster.id, next.cluster.id, &plan.needs_restart);
  Compare("cluster-advertise", current.cluster.advertise, next.cluster.advertise,
          &plan.needs_restart);
  CompareSize("chunk-size", current.tcp.chunk_bytes, next.tcp.chunk_bytes, &plan.needs_restart);
  CompareSize("tcp-inline-max", current.tcp.inline_max, next.tcp.inline_max, &plan.needs_restart);
  Compare("tcp-max-links", current.tcp.max_links, next.tcp.max_links, &plan.needs_restart);
  Compare("tcp-links-per-target", current.tcp.links_per_target, next.tcp.links_per_target,
          &plan.needs_restart);
  Compare("tcp-max-links-per-target", current.tcp.max_links_per_target,
          next.tcp.max_links_per_target, &plan.needs_restart);
  CompareDuration("tcp-connect-timeout", current.tcp.link.connect_timeout,
                  next.tcp.link.connect_timeout, &plan.needs_restart);
  CompareDuration("op-timeout", current.tcp.op_timeout, next.tcp.op_timeout,
                  &plan.needs_restart);
  CompareDuration("tcp-idle-timeout", current.tcp.idle_timeout, next.tcp.idle_timeout,
                  &plan.needs_restart);
  CompareDuration("tcp-link-turn", current.tcp.turn, next.tcp.turn, &plan.needs_restart);
  CompareDuration("tcp-poll-spin", current.tcp.link.poll_spin, next.tcp.link.poll_spin,
                  &plan.needs_restart);
  CompareDuration("tcp-handover-timeout", current.tcp.handover_timeout,
                  next.tcp.handover_timeout, &plan.needs_restart);
  Compare("tcp-target-allow", CidrList(current.tcp.target_allow),
          CidrList(next.tcp.target_allow), &plan.needs_restart);
  // The RDMA device (verbs core) and rc's QPs are set up once.
  if (current.rc_mode != next.rc_mode) plan.needs_restart.push_back("rc: mode changed");
  // The rails in order: a rail added, removed or moved needs its device opened anew.
  Compare("rdma-device", RailList(current.verbs.rails), RailList(next.verbs.rails),
          &plan.needs_restart);
  Compare("rdma-addr", current.verbs.device.address, next.verbs.device.address,
          &plan.needs_restart);
  Compare("rdma-port", current.verbs.device.port, next.verbs.device.port, &plan.needs_restart);
  Compare("rdma-gid-index", current.verbs.device.gid_index, next.verbs.device.gid_index,
          &plan.needs_restart);
  Compare("rdma-cq-depth", current.verbs.poller.cq_depth, next.verbs.poller.cq_depth,
          &plan.needs_restart);
  Compare("rc-max-qps", current.rc.max_qps, next.rc.max_qps, &plan.needs_restart);
  Compare("rc-max-qps-per-client", current.rc.max_qps_per_client, next.rc.max_qps_per_client,
          &plan.needs_restart);
  Compare("rc-sq-depth", current.rc.qp.sq_depth, next.rc.qp.sq_depth, &plan.needs_restart);
  Compare("rc-max-rd-atomic", static_cast<int>(current.rc.qp.max_rd_atomic),
          static_cast<int>(next.rc.qp.max_rd_atomic), &plan.needs_restart);
  Compare("rc-traffic-class", int{current.rc.qp.traffic_class}, int{next.rc.qp.traffic_class},
          &plan.needs_restart);
  Compare("rc-service-level", int{current.rc.qp.service_level}, int{next.rc.qp.service_level},
          &plan.needs_restart);
  CompareDuration("rc-reset-timeout", current.rc.reset_timeout, next.rc.reset_timeout,
                  &plan.needs_restart);
  // dc: the DCI pool and its address handles are built once, on the verbs core.
  if (current.dc.mode != next.dc.mode) plan.needs_restart.push_back("dc: mode changed");
  const dc::DcInitiatorOptions& cd = current.dc.options;
  const dc::DcInitiatorOptions& nd = next.dc.options;
  Compare("dci-count", cd.dci_count, nd.dci_count, &plan.needs_restart);
  Compare("dc-sq-depth", cd.dci.sq_depth, nd.dci.sq_depth, &plan.needs_restart);
  Compare("dc-mtu", cd.mtu, nd.mtu, &plan.needs_restart);
  Compare("dc-max-rd-atomic", int{cd.dci.max_rd_atomic}, int{nd.dci.max_rd_atomic},
          &plan.needs_restart);
  Compare("dc-timeout", int{cd.dci.timeout}, int{nd.dci.timeout}, &plan.needs_restart);
  Compare("dc-retry-cnt", int{cd.dci.retry_cnt}, int{nd.dci.retry_cnt}, &plan.needs_restart);
  Compare("dc-rnr-retry", int{cd.dci.rnr_retry}, int{nd.dci.rnr_retry}, &plan.needs_restart);
  Compare("dc-log-streams", int{cd.log_streams}, int{nd.log_streams}, &plan.needs_restart);
  Compare("dc-log-errored-streams", int{cd.log_errored}, int{nd.log_errored}, &plan.needs_restart);
  Compare("dc-hop-limit", int{cd.ah.hop_limit}, int{nd.ah.hop_limit}, &plan.needs_restart);
  Compare("dc-traffic-class", int{cd.ah.traffic_class}, int{nd.ah.traffic_class},
          &plan.needs_restart);
  Compare("dc-sl", int{cd.ah.service_level}, int{nd.ah.service_level},
          &plan.needs_restart);
  Compare("dc-flow-label", cd.ah.flow_label, nd.ah.flow_label, &plan.needs_restart);
  Compare("dc-ah-cache", cd.ah_cache_size, nd.ah_cache_size, &plan.needs_restart);
  Compare("dc-spread", cd.max_spread, nd.max_spread, &plan.needs_restart);
  // local: the socket, its admission rule and the copy threads are made once.
  const LocalOptions& cl = current.local;
  const LocalOptions& nl = next.local;
  Compare("local-socket", cl.socket_path, nl.socket_path, &plan.needs_restart);
  Compare("local-socket-mode", cl.socket_mode, nl.socket_mode, &plan.needs_restart);
  auto uids = [](const LocalOptions& o) {
    return absl::StrCat(absl::StrJoin(o.allow_uids, ","), o.allow_any ? " *" : "");
  };
  Compare("local-allow-uid", uids(cl), uids(nl), &plan.needs_restart);
  Compare("local-allow-gid", absl::StrJoin(cl.allow_gids, ","),
          absl::StrJoin(nl.allow_gids, ","), &plan.needs_restart);
  CompareSize("local-max-bytes-per-client", cl.max_bytes_per_client, nl.max_bytes_per_client,
              &plan.needs_restart);
  Compare("local-max-regions-per-client", cl.max_regions_per_client,
          nl.max_regions_per_client, &plan.needs_restart);
  Compare("local-max-clients", cl.max_clients, nl.max_clients, &plan.needs_restart);
  auto reserve = [](uint32_t r) { return r == 0 ? std::string("auto") : absl::StrCat(r); };
  Compare("local-fd-reserve", reserve(cl.fd_reserve), reserve(nl.fd_reserve),
          &plan.needs_restart);
  Compare("local-copy-threads", cl.copy_threads, nl.copy_threads, &plan.needs_restart);
  CompareSize("local-split-size", cl.split_bytes, nl.split_bytes, &plan.needs_restart);
  CompareSize("local-lock-piece-size", cl.lock_piece_bytes, nl.lock_piece_bytes,
              &plan.needs_restart);
  Compare("local-lock-threads", cl.lock_threads, nl.lock_threads, &plan.needs_restart);
  Compare("local-lock-idle-ms", cl.lock_idle_ms, nl.lock_idle_ms, &plan.needs_restart);
  Compare("local-lock-at-start", std::string(cl.lock_at_start ? "true" : "false"),
          std::string(nl.lock_at_start ? "true" : "false"), &plan.needs_restart);
  auto budget = [](const LocalOptions& o) {
    return o.lock_budget_bytes.has_value() ? FormatSize(*o.lock_budget_bytes)
                                           : std::string("auto");
  };
  Compare("local-lock-budget", budget(cl), budget(nl), &plan.needs_restart);
  return plan;
}

}  // namespace gdr
