// The checks of a data op's request that need nothing but the request itself (no store, no
// transport): shared by the daemon's validation (daemon/service/validate_op.h) and gdragent's,
// so both refuse the same malformed op with the same words (gdrstore.proto's status table).
#pragma once

#include "absl/status/status.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

// The request's extent and buffer are there and the extent asks for bytes. `extent` / `buffer`
// are nullptr when the request did not set them. INVALID_ARGUMENT naming what is missing.
absl::Status CheckOpExtent(const gdrstore::v1::Extent* extent,
                           const gdrstore::v1::RemoteBuffer* buffer);

// The buffer of a request CheckOpExtent accepted: as long as the extent, a nonzero rkey, and an
// address range that does not wrap the address space. INVALID_ARGUMENT naming the field.
absl::Status CheckOpBuffer(const gdrstore::v1::Extent& extent,
                           const gdrstore::v1::RemoteBuffer& buffer);

}  // namespace gdr
