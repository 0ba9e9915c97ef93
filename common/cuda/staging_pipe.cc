#include "common/cuda/staging_pipe.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/cuda/context.h"
#include "common/cuda/cuda_api.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"

namespace gdr::cuda {

struct StagingPipe::Slot {
  std::byte* host = nullptr;
  CUevent start = nullptr;
  CUevent end = nullptr;
  size_t len = 0;
  bool busy = false;   // a copy was issued and not yet waited for
  uint64_t dptr = 0;   // where a held slot's bytes go (ToDevice)
};

StagingPipe::StagingPipe(int ordinal, size_t slot_bytes)
    : ordinal_(ordinal), slot_bytes_(slot_bytes) {}

absl::StatusOr<std::unique_ptr<StagingPipe>> StagingPipe::Create(int ordinal, size_t slot_bytes,
                                                                 int slots) {
  if (slot_bytes == 0 || slots < 2) {
    return absl::InvalidArgumentError("a staging pipe needs >= 2 slots of > 0 bytes");
  }
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, ordinal));
  std::unique_ptr<StagingPipe> pipe(new StagingPipe(ordinal, slot_bytes));
  pipe->slots_ = std::make_unique<Slot[]>(static_cast<size_t>(slots));
  pipe->nslots_ = slots;
  pipe->lag_ = slots / 2;
  CUstream stream = nullptr;
  GDR_CU_RETURN_IF_ERROR(api, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  pipe->stream_ = stream;
  for (int i = 0; i < slots; ++i) {
    Slot& s = pipe->slots_[i];
    void* p = nullptr;
    GDR_CU_RETURN_IF_ERROR(api, cuMemHostAlloc(&p, slot_bytes, CU_MEMHOSTALLOC_PORTABLE));
    s.host = static_cast<std::byte*>(p);
    GDR_CU_RETURN_IF_ERROR(api, cuEventCreate(&s.start, CU_EVENT_DEFAULT));
    // A thread waiting on a copy sleeps (BLOCKING_SYNC) rather than spinning as the context's
    // default does: a client's link threads (16 a process, several processes a GPU) would
    // otherwise spin against the threads receiving the next payloads.
    GDR_CU_RETURN_IF_ERROR(api, cuEventCreate(&s.end, CU_EVENT_BLOCKING_SYNC));
  }
  return pipe;
}

StagingPipe::~StagingPipe() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CudaApi& api = **loaded;
  if (!UseDevice(api, ordinal_).ok()) return;
  if (stream_ != nullptr) api.cuStreamSynchronize(static_cast<CUstream>(stream_));
  for (int i = 0; i < nslots_; ++i) {
    Slot& s = slots_[i];
    if (s.start) api.cuEventDestroy(s.start);
    if (s.end) api.cuEventDestroy(s.end);
    if (s.host) api.cuMemFreeHost(s.host);
  }
  if (stream_ != nullptr) api.cuStreamDestroy(static_cast<CUstream>(stream_));
}

absl::Status StagingPipe::IssueHeld(int keep) {
  absl::Status first;
  while (held_ > keep) {
    Slot& slot = slots_[(next_ - held_ + nslots_) % nslots_];
    --held_;
    absl::Status s = Issue(slot, true, slot.dptr, slot.len);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

absl::Status StagingPipe::Reclaim(Slot& slot) {
  if (!slot.busy) return absl::OkStatus();
  const CudaApi& api = **Api();  // a pipe exists only when the driver loaded
  slot.busy = false;
  const auto t0 = std::chrono::steady_clock::now();
  // A copy that is nearly done is polled for, briefly, before the thread sleeps on it: the
  // sleeping wait's wake-up (the driver's interrupt, then the thread) can take longer than a
  // 1 MiB copy's tail, and each link waits on its last copy before it acks.
  CUresult r;
  while ((r = api.cuEventQuery(slot.end)) == CUDA_ERROR_NOT_READY &&
         std::chrono::steady_clock::now() - t0 < kPollBeforeSleep) {
  }
  if (r == CUDA_ERROR_NOT_READY) r = api.cuEventSynchronize(slot.end);
  stats_.wait_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (r != CUDA_SUCCESS) return CudaError(api, r, "cuEventSynchronize", __FILE__, __LINE__);
  float ms = 0;
  if (api.cuEventElapsedTime(&ms, slot.start, slot.end) == CUDA_SUCCESS) {
    stats_.copy_ns += static_cast<uint64_t>(ms * 1e6);
  }
  return absl::OkStatus();
}

absl::Status StagingPipe::Issue(Slot& slot, bool to_device, uint64_t dptr, size_t n) {
  const CudaApi& api = **Api();
  CUstream stream = static_cast<CUstream>(stream_);
  GDR_CU_RETURN_IF_ERROR(api, cuEventRecord(slot.start, stream));
  if (to_device) {
    GDR_CU_RETURN_IF_ERROR(api, cuMemcpyHtoDAsync(dptr, slot.host, n, stream));
    stats_.bytes_to_device += n;
  } else {
    GDR_CU_RETURN_IF_ERROR(api, cuMemcpyDtoHAsync(slot.host, dptr, n, stream));
    stats_.bytes_from_device += n;
  }
  GDR_CU_RETURN_IF_ERROR(api, cuEventRecord(slot.end, stream));
  slot.len = n;
  slot.busy = true;
  return absl::OkStatus();
}

bool StagingPipe::busy() const {
  if (held_ > 0) return true;
  for (int i = 0; i < nslots_; ++i)
    if (slots_[i].busy) return true;
  return false;
}

absl::Status StagingPipe::Sync() {
  absl::Status first = IssueHeld(0);
  // Oldest first, so the wait is attributed to the copy that was actually behind.
  for (int k = 0; k < nslots_; ++k) {
    absl::Status s = Reclaim(slots_[(next_ + k) % nslots_]);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

StagingPipe::Result StagingPipe::ToDevice(uint64_t dptr, size_t length,
                                          absl::FunctionRef<absl::Status(std::byte*, size_t)> fill) {
  Result res;
  const CudaApi& api = **Api();
  res.gpu = UseDevice(api, ordinal_);
  size_t done = 0;
  while (done < length) {
    Slot& slot = slots_[next_];
    if (absl::Status s = Reclaim(slot); !s.ok() && res.gpu.ok()) res.gpu = s;
    const size_t n = std::min(slot_bytes_, length - done);
    res.io = fill(slot.host, n);
    if (!res.io.ok()) return res;
    // After a GPU failure the rest of the payload is still read (and dropped) so the stream
    // stays framed; nothing more is copied.
    if (res.gpu.ok()) {
      // Held, not copied yet: the copy of a slot starts once lag_ newer slots were filled
      // (see lag_), or at Sync().
      next_ = (next_ + 1) % nslots_;
      slot.dptr = dptr + done;
      slot.len = n;
      ++held_;
      res.gpu = IssueHeld(lag_);
    }
    done += n;
  }
  return res;
}

StagingPipe::Result StagingPipe::FromDevice(
    uint64_t dptr, size_t length, absl::FunctionRef<absl::Status()> before_first,
    absl::FunctionRef<absl::Status(const std::byte*, size_t)> drain) {
  Result res;
  const CudaApi& api = **Api();
  res.gpu = UseDevice(api, ordinal_);
  if (res.gpu.ok()) res.gpu = Sync();  // every slot free, ring order restarts at next_
  if (!res.gpu.ok()) return res;
  size_t issued = 0, sent = 0;
  const int head = next_;
  for (int k = 0; k < nslots_ && issued < length; ++k) {
    Slot& slot = slots_[(head + k) % nslots_];
    const size_t n = std::min(slot_bytes_, length - issued);
    res.gpu = Issue(slot, false, dptr + issued, n);
    if (!res.gpu.ok()) return res;
    issued += n;
  }
  int i = 0;
  if (length == 0) {
    res.io = before_first();
    res.sent_any = true;
    return res;
  }
  while (sent < length) {
    Slot& slot = slots_[(head + i) % nslots_];
    res.gpu = Reclaim(slot);
    if (!res.gpu.ok()) return res;
    if (!res.sent_any) {
      res.sent_any = true;
      res.io = before_first();
      if (!res.io.ok()) return res;
    }
    res.io = drain(slot.host, slot.len);
    if (!res.io.ok()) return res;
    sent += slot.len;
    if (issued < length) {
      const size_t n = std::min(slot_bytes_, length - issued);
      res.gpu = Issue(slot, false, dptr + issued, n);
      if (!res.gpu.ok()) return res;
      issued += n;
    }
    ++i;
  }
  next_ = (head + i) % nslots_;
  return res;
}

}  // namespace gdr::cuda
