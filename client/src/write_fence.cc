#include "client/src/write_fence.h"

#include "absl/strings/str_cat.h"

namespace gdr {

gdrstore::OpCallback AfterWriteFence(std::function<absl::Status()> fence,
                                     gdrstore::OpCallback done) {
  if (!fence) return done;
  return [fence = std::move(fence), done = std::move(done)](
             absl::StatusOr<gdrstore::OpResult> r) {
    if (r.ok()) {
      if (absl::Status s = fence(); !s.ok()) {
        r = absl::Status(s.code(), absl::StrCat("the bytes arrived but the GPUDirect RDMA write "
                                                "flush failed, so GPU work may not see them: ",
                                                s.message()));
      }
    }
    done(std::move(r));
  };
}

}  // namespace gdr
