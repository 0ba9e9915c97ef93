#include "client/src/cluster/member_link.h"

#include "absl/strings/str_cat.h"
#include "client/src/client_access.h"

namespace gdr::cluster {

absl::StatusOr<std::unique_ptr<MemberLink>> MemberLink::Connect(const std::string& id,
                                                                const std::string& address,
                                                                gdrstore::ClientOptions options,
                                                                uint64_t generation,
                                                                const gdrstore::Client* share) {
  options.daemon_address = address;
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> client =
      share == nullptr ? gdrstore::Client::Connect(options)
                       : ClientAccess::ConnectSharing(*share, address);
  if (!client.ok()) {
    return absl::UnavailableError(absl::StrCat("member ", id, " (", address,
                                               "): ", client.status().message()));
  }
  return std::unique_ptr<MemberLink>(
      new MemberLink(id, address, generation, std::move(*client)));
}

MemberLink::MemberLink(std::string id, std::string address, uint64_t generation,
                       std::unique_ptr<gdrstore::Client> client)
    : id_(std::move(id)),
      address_(std::move(address)),
      generation_(generation),
      client_(std::move(client)) {}

MemberLink::~MemberLink() {
  std::vector<std::shared_ptr<gdrstore::OpStream>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = std::move(retired_);
    if (stream_) all.push_back(std::move(stream_));
  }
  for (auto& s : all) (void)s->Close();
}

void MemberLink::Submit(gdrstore::OpKind kind, const gdrstore::Extent& extent,
                        const gdrstore::Buffer& buffer, size_t buffer_offset,
                        const gdrstore::OpOptions& options, gdrstore::OpCallback done) {
  std::shared_ptr<gdrstore::OpStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stream_) {
      absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> opened = client_->OpenStream();
      if (!opened.ok()) {
        done(absl::UnavailableError(absl::StrCat("member ", id_, " (", address_,
                                                 "): ", opened.status().message())));
        return;
      }
      stream_ = std::move(*opened);
    }
    stream = stream_;
  }
  // A stream that has failed answers every later op with the call's error: the piece that
  // sees it retires the stream so the next opens a new one. Retired streams are closed with
  // the link, never here: this runs on the stream's own callback thread.
  std::weak_ptr<gdrstore::OpStream> weak = stream;
  stream->Submit(kind, extent, buffer, buffer_offset,
                 [this, weak, done = std::move(done)](absl::StatusOr<gdrstore::OpResult> r) {
                   if (!r.ok() && !absl::IsInvalidArgument(r.status()) &&
                       !absl::IsOutOfRange(r.status()) && !absl::IsNotFound(r.status())) {
                     std::lock_guard<std::mutex> lock(mu_);
                     if (stream_ && stream_ == weak.lock()) retired_.push_back(std::move(stream_));
                   }
                   if (!r.ok()) {
                     done(absl::Status(r.status().code(),
                                       absl::StrCat("member ", id_, " (", address_, "): ",
                                                    r.status().message())));
                     return;
                   }
                   done(std::move(r));
                 },
                 options);
}

}  // namespace gdr::cluster
