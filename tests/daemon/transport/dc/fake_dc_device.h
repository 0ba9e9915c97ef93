// A DcDevice for unit tests: stands in for a ConnectX that cannot exist on this machine. It
// records every DCI, AH and posted work request, and models the mlx5 error contract the
// initiator relies on: an error completion moves the DCI to ERR and flushes the rest of its
// send queue in order, or, on a DCI with stream channels, flushes only that stream (and moves
// the DCI to ERR once `errored_streams_to_fail` streams are in error). It checks the
// initiator's side of the contract: never more WRs in flight on a DCI than its depth, and no
// RESET / stream reset while work requests are still outstanding there.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/transport/dc/dc_device.h"

namespace gdr::dc::testing {

class FakeAh final : public AddressHandle {
 public:
  FakeAh(AhKey key, AhSettings settings, std::atomic<int>* live)
      : key(key), settings(settings), live_(live) {
    ++*live_;
  }
  ~FakeAh() override { --*live_; }
  const AhKey key;
  const AhSettings settings;

 private:
  std::atomic<int>* live_;
};

struct PostedWr {
  uint32_t dci = 0;
  DcWr wr;
  uint64_t seq = 0;  // post order across the device
};

class FakeDcDevice final : public DcDevice {
 public:
  explicit FakeDcDevice(DcCaps caps) : caps_(std::move(caps)) {}
  ~FakeDcDevice() override {
    if (dci_count_out_ != nullptr) *dci_count_out_ = dci_count();
  }
  // A refused DcInitiator::Create destroys the device it was handed: a test that still wants to
  // know how many DCIs it got reads them here (`out` must outlive the device).
  void ReportDciCountOnDestruction(size_t* out) { dci_count_out_ = out; }

  static DcCaps ConnectX6Caps() {
    DcCaps c;
    c.mlx5 = true;
    c.dc = true;
    c.max_qp = 1 << 17;
    c.max_qp_wr = 32768;
    c.max_qp_rd_atom = 16;
    c.port_max_msg_size = 1u << 30;
    c.port_active_mtu = 4096;
    return c;
  }

  const DcCaps& caps() const override { return caps_; }

  absl::Status CreateDci(uint32_t index, const DciSettings& settings) override {
    absl::MutexLock lock(&mu_);
    if (fail_create_dci_at_ >= 0 && static_cast<int>(index) == fail_create_dci_at_) {
      return absl::Status(absl::StatusCode::kResourceExhausted,
                          "mlx5dv_create_qp: Cannot allocate memory (errno 12)");
    }
    // The hardware's limits: the provider sizes the send queue in 64-byte blocks, two per
    // DCI WQE (mlx5dv_create_qp: EINVAL beyond max_qp_wr), and kernels since 6.2 check the
    // READ depth against the DC initiator limit at RTR->RTS.
    uint32_t blocks = 1;
    while (blocks < settings.sq_depth) blocks <<= 1;
    if (caps_.max_qp_wr != 0 && 2ull * blocks > caps_.max_qp_wr) {
      return absl::InvalidArgumentError("mlx5dv_create_qp: Invalid argument (errno 22)");
    }
    if (caps_.max_dc_init_rd_atom != 0 && settings.max_rd_atomic > caps_.max_dc_init_rd_atom) {
      return absl::InvalidArgumentError(
          "ibv_modify_qp: Invalid argument (errno 22) DCI to RTS");
    }
    EXPECT_EQ(index, dcis_.size()) << "DCIs are created densely, in order";
    Dci d;
    d.settings = settings;
    dcis_.push_back(std::move(d));
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<AddressHandle>> CreateAh(const AhKey& key,
                                                          const AhSettings& settings) override {
    ++ah_creates_;
    {
      // A held key stands for a RoCE neighbour that takes its time to resolve.
      absl::MutexLock lock(&gate_mu_);
      if (held_key_ && *held_key_ == key) {
        ++blocked_creates_;
        gate_mu_.Await(absl::Condition(this, &FakeDcDevice::NotHeld));
        --blocked_creates_;
      }
    }
    if (fail_create_ah_) return absl::UnavailableError("ibv_create_ah: No route to host (errno 113)");
    return std::shared_ptr<AddressHandle>(std::make_shared<FakeAh>(key, settings, &live_ahs_));
  }

  absl::Status Post(uint32_t dci, std::span<const DcWr> wrs) override {
    absl::MutexLock lock(&mu_);
    EXPECT_LT(dci, dcis_.size());
    ++posts_;
    if (fail_next_posts_ > 0) {
      --fail_next_posts_;
      return absl::Status(absl::StatusCode::kResourceExhausted,
                          "ibv_wr_complete: Cannot allocate memory (errno 12)");
    }
    Dci& d = dcis_[dci];
    for (const DcWr& wr : wrs) {
      PostedWr p{dci, wr, seq_++};
      if (d.in_error || (wr.stream < d.stream_error.size() && d.stream_error[wr.stream])) {
        // Hardware flushes what is posted to a QP (or stream) in error.
        p.wr.handler = wr.handler;
        flush_on_post_.push_back(p);
      }
      d.outstanding.push_back(p);
      all_posted_.push_back(p);
    }
    EXPECT_LE(d.outstanding.size(), d.settings.sq_depth)
        << "DCI " << dci << " overrun: more WRs in flight than its send queue holds";
    cq_reserved_ += wrs.size();
    return absl::OkStatus();
  }

  void ReleaseCompletionSlots(uint32_t n) override {
    absl::MutexLock lock(&mu_);
    EXPECT_GE(cq_reserved_, n);
    cq_reserved_ -= n;
  }

  absl::StatusOr<bool> DciInError(uint32_t dci) override {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].in_error;
  }

  absl::Status RecoverDci(uint32_t dci) override {
    absl::MutexLock lock(&mu_);
    Dci& d = dcis_[dci];
    EXPECT_TRUE(d.outstanding.empty())
        << "DCI " << dci << " reset with " << d.outstanding.size() << " WRs outstanding";
    ++d.recoveries;
    if (fail_recover_) return absl::InternalError("ibv_modify_qp: Invalid argument (errno 22) QP to RESET");
    d.in_error = false;
    std::fill(d.stream_error.begin(), d.stream_error.end(), false);
    return absl::OkStatus();
  }

  absl::Status ResetStream(uint32_t dci, uint16_t stream) override {
    absl::MutexLock lock(&mu_);
    Dci& d = dcis_[dci];
    for (const PostedWr& p : d.outstanding) {
      EXPECT_NE(p.wr.stream, stream) << "stream " << stream << " of DCI " << dci
                                     << " reset with WRs outstanding on it";
    }
    ++d.stream_resets;
    if (stream < d.stream_error.size()) d.stream_error[stream] = false;
    return absl::OkStatus();
  }

  void FlushAll() override {
    {
      absl::MutexLock lock(&mu_);
      ++flush_all_calls_;
      for (Dci& d : dcis_) d.in_error = true;
    }
    FlushWhere([](const PostedWr&) { return true; });
  }

  // --- test controls -------------------------------------------------------------------------

  // Completes the oldest outstanding WR (device-wide post order) with `status`, applying the
  // error model. False when nothing is outstanding.
  bool CompleteOldest(ibv_wc_status status = IBV_WC_SUCCESS) {
    PostedWr p;
    {
      absl::MutexLock lock(&mu_);
      const PostedWr* oldest = nullptr;
      for (const Dci& d : dcis_) {
        if (!d.outstanding.empty() && (!oldest || d.outstanding.front().seq < oldest->seq)) {
          oldest = &d.outstanding.front();
        }
      }
      if (!oldest) return false;
      p = *oldest;
    }
    Complete(p.seq, status);
    return true;
  }

  // Completes every outstanding WR successfully (and whatever they cause), oldest first.
  void CompleteAll() {
    while (CompleteOldest(IBV_WC_SUCCESS)) {
    }
  }

  // Completes the outstanding WR posted as number `seq` with `status`. An error models the
  // hardware: the DCI (or only the WR's stream) goes to error and its other WRs flush.
  void Complete(uint64_t seq, ibv_wc_status status, uint32_t vendor_err = 0) {
    PostedWr p;
    bool dci_err = false;
    {
      absl::MutexLock lock(&mu_);
      bool found = false;
      for (Dci& d : dcis_) {
        for (auto it = d.outstanding.begin(); it != d.outstanding.end(); ++it) {
          if (it->seq == seq) {
            p = *it;
            d.outstanding.erase(it);
            found = true;
            break;
          }
        }
        if (found) break;
      }
      ASSERT_TRUE(found) << "WR " << seq << " is not outstanding";
      if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
        Dci& d = dcis_[p.dci];
        if (d.settings.log_streams == 0) {
          d.in_error = true;
          dci_err = true;
        } else {
          if (d.stream_error.empty()) d.stream_error.assign(1u << d.settings.log_streams, false);
          d.stream_error[p.wr.stream] = true;
          const auto errored = std::count(d.stream_error.begin(), d.stream_error.end(), true);
          if (errored >= errored_streams_to_fail_) {
            d.in_error = true;
            dci_err = true;
          }
        }
      }
    }
    Deliver(p, status, vendor_err);
    if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) {
      const uint32_t dci = p.dci;
      const uint16_t stream = p.wr.stream;
      FlushWhere([&](const PostedWr& q) {
        return q.dci == dci && (dci_err || q.wr.stream == stream);
      });
    }
    DeliverPendingPostFlushes();
  }

  // Every WR posted so far, in post order (including completed ones).
  std::vector<PostedWr> posted() const {
    absl::MutexLock lock(&mu_);
    return all_posted_;
  }
  std::vector<PostedWr> outstanding() const {
    absl::MutexLock lock(&mu_);
    std::vector<PostedWr> out;
    for (const Dci& d : dcis_) out.insert(out.end(), d.outstanding.begin(), d.outstanding.end());
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
    return out;
  }
  size_t outstanding_on(uint32_t dci) const {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].outstanding.size();
  }
  DciSettings dci_settings(uint32_t dci) const {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].settings;
  }
  size_t dci_count() const {
    absl::MutexLock lock(&mu_);
    return dcis_.size();
  }
  int recoveries(uint32_t dci) const {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].recoveries;
  }
  int stream_resets(uint32_t dci) const {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].stream_resets;
  }
  bool in_error(uint32_t dci) const {
    absl::MutexLock lock(&mu_);
    return dcis_[dci].in_error;
  }
  uint32_t cq_reserved() const {
    absl::MutexLock lock(&mu_);
    return cq_reserved_;
  }
  int posts() const {
    absl::MutexLock lock(&mu_);
    return posts_;
  }
  int ah_creates() const { return ah_creates_.load(); }
  int live_ahs() const { return live_ahs_.load(); }

  void set_fail_create_dci_at(int index) {
    absl::MutexLock lock(&mu_);
    fail_create_dci_at_ = index;
  }
  void set_fail_create_ah(bool fail) { fail_create_ah_ = fail; }
  // CreateAh of `key` blocks until ReleaseCreateAh.
  void HoldCreateAh(const AhKey& key) {
    absl::MutexLock lock(&gate_mu_);
    held_key_ = key;
  }
  void ReleaseCreateAh() {
    absl::MutexLock lock(&gate_mu_);
    held_key_.reset();
  }
  // Returns once `n` CreateAh calls are blocked on the held key.
  void AwaitBlockedCreates(int n) {
    absl::MutexLock lock(&gate_mu_);
    want_blocked_ = n;
    gate_mu_.Await(absl::Condition(this, &FakeDcDevice::EnoughBlocked));
  }
  void set_fail_next_posts(int n) {
    absl::MutexLock lock(&mu_);
    fail_next_posts_ = n;
  }
  void set_fail_recover(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_recover_ = fail;
  }
  void set_errored_streams_to_fail(int n) {
    absl::MutexLock lock(&mu_);
    errored_streams_to_fail_ = n;
  }

 private:
  struct Dci {
    DciSettings settings;
    std::deque<PostedWr> outstanding;
    bool in_error = false;
    std::vector<bool> stream_error;
    int recoveries = 0;
    int stream_resets = 0;
  };

  static void Deliver(const PostedWr& p, ibv_wc_status status, uint32_t vendor_err) {
    ibv_wc wc{};
    wc.wr_id = reinterpret_cast<uint64_t>(p.wr.handler);
    wc.status = status;
    wc.vendor_err = vendor_err;
    wc.opcode = p.wr.op == DcOpcode::kWrite ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ;
    p.wr.handler->OnCompletion(wc);
  }

  // Flushes, in post order, every WR outstanding now that matches `pred`, as the hardware
  // flushes what its queue holds at the error; WRs posted while the flushes are delivered
  // (the initiator re-posting elsewhere, or on a DCI it already recovered) are not touched.
  // Delivered without the lock: the handler may post again, which takes it.
  template <typename Pred>
  void FlushWhere(Pred pred) {
    std::vector<uint64_t> victims;
    {
      absl::MutexLock lock(&mu_);
      for (const Dci& d : dcis_) {
        for (const PostedWr& q : d.outstanding) {
          if (pred(q)) victims.push_back(q.seq);
        }
      }
    }
    std::sort(victims.begin(), victims.end());
    for (uint64_t seq : victims) {
      PostedWr p;
      bool found = false;
      {
        absl::MutexLock lock(&mu_);
        for (Dci& d : dcis_) {
          for (auto it = d.outstanding.begin(); it != d.outstanding.end(); ++it) {
            if (it->seq == seq) {
              p = *it;
              d.outstanding.erase(it);
              found = true;
              break;
            }
          }
          if (found) break;
        }
      }
      if (found) Deliver(p, IBV_WC_WR_FLUSH_ERR, 0);
    }
  }

  void DeliverPendingPostFlushes() {
    for (;;) {
      uint64_t seq;
      {
        absl::MutexLock lock(&mu_);
        if (flush_on_post_.empty()) return;
        seq = flush_on_post_.front().seq;
        flush_on_post_.erase(flush_on_post_.begin());
      }
      bool still = false;
      for (const PostedWr& q : outstanding()) still |= q.seq == seq;
      if (still) Complete(seq, IBV_WC_WR_FLUSH_ERR);
    }
  }

  bool NotHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) { return !held_key_; }
  bool EnoughBlocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) {
    return blocked_creates_ >= want_blocked_;
  }

  const DcCaps caps_;
  absl::Mutex gate_mu_;
  std::optional<AhKey> held_key_ ABSL_GUARDED_BY(gate_mu_);
  int blocked_creates_ ABSL_GUARDED_BY(gate_mu_) = 0;
  int want_blocked_ ABSL_GUARDED_BY(gate_mu_) = 0;
  mutable absl::Mutex mu_;
  std::vector<Dci> dcis_ ABSL_GUARDED_BY(mu_);
  std::vector<PostedWr> all_posted_ ABSL_GUARDED_BY(mu_);
  std::vector<PostedWr> flush_on_post_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t cq_reserved_ ABSL_GUARDED_BY(mu_) = 0;
  int posts_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_create_dci_at_ ABSL_GUARDED_BY(mu_) = -1;
  int fail_next_posts_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_recover_ ABSL_GUARDED_BY(mu_) = false;
  int errored_streams_to_fail_ ABSL_GUARDED_BY(mu_) = 2;
  int flush_all_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> fail_create_ah_{false};
  std::atomic<int> ah_creates_{0};
  std::atomic<int> live_ahs_{0};
  size_t* dci_count_out_ = nullptr;
};

}  // namespace gdr::dc::testing
