#include "daemon/service/validate_op.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/base/units.h"
#include "common/wire/op_request_checks.h"
#include "daemon/store/store.h"
#include "daemon/transport/transport_set.h"

namespace gdr {

absl::StatusOr<TransferOp> ValidateOp(Direction direction, const gdrstore::v1::Extent* extent,
                                      const gdrstore::v1::RemoteBuffer* buffer, const Store& store,
                                      uint64_t max_op_bytes, const TransportSet& transports) {
  // The store-free checks are two calls: a request wrong in both its volume and its buffer is
  // refused for its volume (NOT_FOUND, OUT_OF_RANGE) first.
  GDR_RETURN_IF_ERROR(CheckOpExtent(extent, buffer));
  if (extent->length() > max_op_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extent.length ", extent->length(), " is above the daemon's max op size of ",
        max_op_bytes, " bytes (", FormatSize(max_op_bytes), "); split the transfer"));
  }
  std::shared_ptr<const Volume> volume = store.Find(extent->volume());
  if (volume == nullptr) {
    std::string known;
    for (const std::shared_ptr<const Volume>& v : store.Volumes()) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", v->name());
    }
    return absl::NotFoundError(absl::StrCat("volume '", ShownVolumeName(extent->volume()),
                                            "' does not exist (volumes: ", known, ")"));
  }
  if (extent->offset() > volume->size() || extent->length() > volume->size() - extent->offset()) {
    return absl::OutOfRangeError(absl::StrCat("extent [", extent->offset(), ", +",
                                              extent->length(), ") is past the end of volume '",
                                              volume->name(), "' (", volume->size(), " bytes)"));
  }
  // A file volume whose file was truncated behind the daemon's back: refused here, naming the
  // file, rather than faulting (SIGBUS) wherever its pages are touched.
  GDR_RETURN_IF_ERROR(volume->CheckBacked());
  if (direction == Direction::kClientToStore && volume->read_only()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume '", volume->name(), "' is read-only (its file ", volume->file(),
        " is served for gets; a --volume-dir given `writable` takes puts)"));
  }
  GDR_RETURN_IF_ERROR(CheckOpBuffer(*extent, *buffer));
  // Which transport the endpoint names, and whether this daemon runs it; the rest of the
  // endpoint is that transport's to read.
  const std::optional<TransportKind> kind = TransportOfEndpoint(buffer->endpoint_case());
  if (!kind) {
    std::vector<std::string> names;
    for (TransportKind k : kTransportKinds) names.push_back(TransportName(k));
    std::sort(names.begin(), names.end());
    const std::string last = names.back();
    names.pop_back();
    return absl::InvalidArgumentError(
        absl::StrCat("buffer has no endpoint (or one this daemon does not know): set ",
                     absl::StrJoin(names, ", "), names.empty() ? "" : " or ", last));
  }
  if (!transports.offered().Has(*kind)) {
    return absl::UnimplementedError(absl::StrCat("transport ", TransportName(*kind),
                                                 " is not offered by this daemon (see GetInfo)"));
  }
  TransferOp op;
  GDR_ASSIGN_OR_RETURN(op.destination, transports.ParseDestination(*kind, *buffer));
  op.transport = *kind;
  op.direction = direction;
  op.volume = volume->name();
  op.offset = extent->offset();
  op.local = volume->data() + extent->offset();
  op.store_volume = std::move(volume);
  op.length = extent->length();
  op.remote_address = buffer->address();
  op.rkey = buffer->rkey();
  return op;
}

}  // namespace gdr
