#include "daemon/ops/dc_flags.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_status.h"

namespace gdr {

void AddDcFlags(CLI::App& app, DcFlagValues* v) {
  app.add_option("--dc", v->mode,
                 "dc transport (mlx5 DC): auto (offer it where the device can), on (fail at start "
                 "if it cannot), off")
      ->capture_default_str();
  app.add_option("--dci-count", v->dci_count, "DC initiators in the pool (bounded by the device)")
      ->capture_default_str();
  app.add_option("--dc-sq-depth", v->sq_depth,
                 "send queue depth of each DCI (1..16384; at most half the device's max_qp_wr, "
                 "as a DCI work request takes two send-queue slots)")
      ->capture_default_str();
  app.add_option("--dc-mtu", v->mtu,
                 "path MTU of the DCIs in bytes (256, 512, 1024, 2048, 4096; 0: the port's "
                 "active MTU). Every client's DCT must match it: use the fabric's smallest")
      ->capture_default_str();
  app.add_option("--dc-max-rd-atomic", v->max_rd_atomic,
                 "RDMA READs in flight per DCI (capped at the device's max_qp_init_rd_atom)")
      ->capture_default_str();
  app.add_option("--dc-timeout", v->timeout, "DCI local ACK timeout exponent: 4.096us * 2^N")
      ->capture_default_str();
  app.add_option("--dc-retry-cnt", v->retry_cnt, "DCI transport retries (0..7)")->capture_default_str();
  app.add_option("--dc-rnr-retry", v->rnr_retry, "DCI RNR retries (0..7, 7 = infinite)")
      ->capture_default_str();
  app.add_option("--dc-log-streams", v->log_streams,
                 "DCI stream channels, 2^N per DCI where the device has them; 0 = none")
      ->capture_default_str();
  app.add_option("--dc-log-errored-streams", v->log_errored,
                 "errored streams (2^N) a DCI tolerates before it needs a full reset")
      ->capture_default_str();
  app.add_option("--dc-hop-limit", v->hop_limit, "GRH hop limit of DC address handles (routed RoCEv2)")
      ->capture_default_str();
  app.add_option("--dc-traffic-class", v->traffic_class, "GRH traffic class (DSCP << 2 | ECN)")
      ->capture_default_str();
  app.add_option("--dc-sl", v->service_level, "service level of DC address handles")
      ->capture_default_str();
  app.add_option("--dc-flow-label", v->flow_label, "GRH flow label (20 bits)")->capture_default_str();
  app.add_option("--dc-ah-cache", v->ah_cache, "address handles cached (LRU)")->capture_default_str();
  app.add_option("--dc-spread", v->spread, "DCIs the chunks of one large op may spread over")
      ->capture_default_str();
}

absl::StatusOr<dc::DcTransportConfig> FinishDcFlags(const DcFlagValues& v) {
  dc::DcTransportConfig c;
  if (v.mode == "auto") {
    c.mode = dc::DcTransportConfig::Mode::kAuto;
  } else if (v.mode == "on") {
    c.mode = dc::DcTransportConfig::Mode::kOn;
  } else if (v.mode == "off") {
    c.mode = dc::DcTransportConfig::Mode::kOff;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--dc must be auto, on or off, not '", v.mode, "'"));
  }
  auto range = [](const char* flag, uint32_t value, uint32_t lo, uint32_t hi) -> absl::Status {
    if (value < lo || value > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", value, " is not in ", lo, "..", hi));
    }
    return absl::OkStatus();
  };
  for (const absl::Status& s :
       {range("--dci-count", v.dci_count, 1, 4096), range("--dc-sq-depth", v.sq_depth, 1, 16384),
        range("--dc-max-rd-atomic", v.max_rd_atomic, 1, 255), range("--dc-timeout", v.timeout, 0, 31),
        range("--dc-retry-cnt", v.retry_cnt, 0, 7), range("--dc-rnr-retry", v.rnr_retry, 0, 7),
        range("--dc-log-streams", v.log_streams, 0, 15),
        range("--dc-log-errored-streams", v.log_errored, 0, 15),
        range("--dc-hop-limit", v.hop_limit, 1, 255),
        range("--dc-traffic-class", v.traffic_class, 0, 255), range("--dc-sl", v.service_level, 0, 15),
        range("--dc-flow-label", v.flow_label, 0, 0xFFFFF), range("--dc-ah-cache", v.ah_cache, 1, 1 << 20),
        range("--dc-spread", v.spread, 1, 64)}) {
    if (!s.ok()) return s;
  }
  if (ibv_mtu unused; v.mtu != 0 && !verbs::MtuFromBytes(v.mtu, &unused).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dc-mtu ", v.mtu, " is not a path MTU: 256, 512, 1024, 2048, 4096, or 0 (the port's)"));
  }
  dc::DcInitiatorOptions& o = c.options;
  o.dci_count = v.dci_count;
  o.dci.sq_depth = v.sq_depth;
  o.mtu = v.mtu;
  o.dci.max_rd_atomic = static_cast<uint8_t>(v.max_rd_atomic);
  o.dci.timeout = static_cast<uint8_t>(v.timeout);
  o.dci.retry_cnt = static_cast<uint8_t>(v.retry_cnt);
  o.dci.rnr_retry = static_cast<uint8_t>(v.rnr_retry);
  o.use_streams = v.log_streams > 0;
  o.log_streams = static_cast<uint8_t>(v.log_streams);
  o.log_errored = static_cast<uint8_t>(v.log_errored);
  o.ah.hop_limit = static_cast<uint8_t>(v.hop_limit);
  o.ah.traffic_class = static_cast<uint8_t>(v.traffic_class);
  o.ah.service_level = static_cast<uint8_t>(v.service_level);
  o.ah.flow_label = v.flow_label;
  o.ah_cache_size = v.ah_cache;
  o.max_spread = v.spread;
  return c;
}

}  // namespace gdr
