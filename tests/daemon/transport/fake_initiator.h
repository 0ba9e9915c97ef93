// An Initiator that moves nothing and reports what it is told: it stands in for a transport
// whose hardware cannot exist here (mlx5 DC above all) when testing what sits on top of the
// Initiator interface. Every call it receives is recorded.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transport/initiator.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr::testing {

// What a FakeInitiator's ParseDestination makes unless told otherwise: a destination of its
// kind with nothing in it.
class FakeDestination final : public Destination {
 public:
  explicit FakeDestination(TransportKind kind) : kind_(kind) {}
  TransportKind transport() const override { return kind_; }

 private:
  const TransportKind kind_;
};

class FakeInitiator final : public Initiator {
 public:
  using Parser = std::function<absl::StatusOr<std::shared_ptr<const Destination>>(
      const gdrstore::v1::RemoteBuffer&)>;

  // `calls` (may be shared by several fakes) receives "dc:Shutdown" etc. in call order.
  FakeInitiator(TransportKind kind, InitiatorStats stats, std::vector<std::string>* calls)
      : kind_(kind), stats_(stats), calls_(calls) {}

  TransportKind kind() const override { return kind_; }
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const override {
    if (parser_) return parser_(buffer);
    return std::make_shared<const FakeDestination>(kind_);
  }
  absl::Status Submit(const TransferOp& op, OpDone done) override {
    Record("Submit");
    if (!refuse_.ok()) return refuse_;
    done(absl::OkStatus());
    return absl::OkStatus();
  }
  absl::Status CheckHealth(absl::Duration max_stall) const override { return health_; }
  void StartDrain() override { Record("StartDrain"); }
  void Shutdown() override { Record("Shutdown"); }
  InitiatorStats stats() const override { return stats_; }
  std::string Describe() const override {
    return absl::StrCat("fake ", TransportName(kind_), " with ", stats_.capacity, " channels");
  }
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const override {
    if (kind_ == TransportKind::kRc) info->mutable_rdma()->set_rc_connections(stats_.clients);
  }

  void set_health(absl::Status s) { health_ = std::move(s); }
  void set_refuse(absl::Status s) { refuse_ = std::move(s); }
  // Endpoints are read by `parser` (e.g. the real transport's, ParseTcpDestination).
  void set_parser(Parser parser) { parser_ = std::move(parser); }

 private:
  void Record(const char* what) const {
    if (calls_ != nullptr) calls_->push_back(absl::StrCat(TransportName(kind_), ":", what));
  }
  const TransportKind kind_;
  const InitiatorStats stats_;
  std::vector<std::string>* const calls_;
  absl::Status health_;
  absl::Status refuse_;
  Parser parser_;
};

}  // namespace gdr::testing
