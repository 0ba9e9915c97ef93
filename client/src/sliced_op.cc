#include "client/src/sliced_op.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"

namespace gdr {

namespace {

struct SlicedOp {
  std::shared_ptr<ClientTransport> transport;
  SliceSubmit submit;
  std::mutex mu;
  size_t left = 0;
  bool several = false;
  gdrstore::OpResult sum{0, 0, true, std::nullopt, ""};
  absl::Status error;
  gdrstore::OpCallback done;
};

void Finish(const std::shared_ptr<SlicedOp>& op, const ClientTransport::Slice& slice,
            const absl::StatusOr<gdrstore::OpResult>& r) {
  gdrstore::OpCallback done;
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (r.ok()) {
      op->sum.bytes += r->bytes;
      op->sum.service_ns = std::max(op->sum.service_ns, r->service_ns);
      op->sum.synced = op->sum.synced && r->synced;
      op->sum.path = MergePaths(op->sum.path, r->path);
    } else if (op->error.ok()) {
      op->error = !op->several ? r.status()
                               : absl::Status(r.status().code(),
                                              absl::StrCat("slice [", slice.offset, ", +",
                                                           slice.length, "): ",
                                                           r.status().message()));
    }
    if (--op->left > 0) return;
    done = std::move(op->done);
  }
  if (!op->error.ok()) {
    done(op->error);
  } else {
    done(op->sum);
  }
}

void Attempt(const std::shared_ptr<SlicedOp>& op, const ClientTransport::Slice& slice,
             bool resubmitted) {
  op->submit(slice, [op, slice, resubmitted](absl::StatusOr<gdrstore::OpResult> r) {
    op->transport->Record(slice.rail, r.ok() ? r->bytes : 0, r.ok(), resubmitted);
    if (!r.ok() && !resubmitted && RetryOnAnotherRail(r.status().code())) {
      if (std::optional<int> other = op->transport->Reroute(slice.rail, r.status())) {
        ClientTransport::Slice again = slice;
        again.rail = *other;
        Attempt(op, again, /*resubmitted=*/true);
        return;
      }
    }
    Finish(op, slice, r);
  });
}

}  // namespace

bool RetryOnAnotherRail(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kAborted ||
         code == absl::StatusCode::kInternal || code == absl::StatusCode::kUnknown;
}

void RunSliced(std::shared_ptr<ClientTransport> transport,
               std::vector<ClientTransport::Slice> slices, SliceSubmit submit,
               gdrstore::OpCallback done) {
  if (slices.empty()) {
    done(gdrstore::OpResult{});
    return;
  }
  auto op = std::make_shared<SlicedOp>();
  op->transport = std::move(transport);
  op->submit = std::move(submit);
  op->left = slices.size();
  op->several = slices.size() > 1;
  op->done = std::move(done);
  for (const ClientTransport::Slice& s : slices) Attempt(op, s, /*resubmitted=*/false);
}

}  // namespace gdr
