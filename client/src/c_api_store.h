// The C ABI's store handles: a client (one daemon) and a cluster are both a gdrstore::Store, so
// the same buffer, op, stream and poll calls (c_api.cc, c_api_stream.cc) take either; only what
// is one kind's alone (GetInfo, cluster layouts) asks which it has.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/src/c_api_handle.h"
#include "gdrstore/store.h"

namespace gdr::capi {

struct StreamHandle;

// What a store's buffers and streams know of it, shared so that it outlives the store: its
// handle value and kind, whether it was closed, and its streams (a client's close ends them).
struct StoreLife {
  explicit StoreLife(Kind k) : kind(k) {}
  const Kind kind;  // kClient or kCluster
  std::atomic<HandleId> id{0};
  std::atomic<bool> closed{false};
  absl::Mutex mu;
  std::vector<std::weak_ptr<StreamHandle>> streams ABSL_GUARDED_BY(mu);

  // "client 0x2a" / "cluster 0x2b", for messages.
  std::string Name() const;
};

// A client or cluster handle. Thread-safe: nothing in it changes after Register.
struct StoreHandle : CHandle {
  explicit StoreHandle(Kind k) : CHandle(k), life(std::make_shared<StoreLife>(k)) {}
  virtual gdrstore::Store& store() const = 0;
  const std::shared_ptr<StoreLife> life;
};

// A buffer made by a client or a cluster (the old gdrstore_cluster_buffer is one too). It
// keeps no reference to its store: a C++ Buffer outlives its Store safely, so a store closed
// first is really closed.
struct BufferHandle : CHandle {
  static constexpr Kind kKind = Kind::kBuffer;
  BufferHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::Buffer> buffer;
  std::shared_ptr<StoreLife> owner;
};

// The live client or cluster `handle`; INVALID_ARGUMENT naming it (`what`: which argument)
// when it is NULL, not live, or a handle of another kind.
absl::StatusOr<std::shared_ptr<StoreHandle>> FindStore(const void* handle, const char* what);

// FindStore for the handle a call is made on: nullptr with the reason recorded as this
// thread's failure on `handle` (the caller returns GDRSTORE_INVALID_ARGUMENT).
std::shared_ptr<StoreHandle> SelfStore(const void* handle);

// OK when buffer `b` may carry an op of the store `life` describes (`user` names the op's
// store or stream for the message): a buffer belongs to the store that made it, whose
// transport alone reaches its memory.
absl::Status SameStore(const BufferHandle& b, const StoreLife& life, const std::string& user);

// Wraps a made Buffer as a handle of `s` into *out; s's failure otherwise.
gdrstore_status WrapBuffer(const StoreHandle& s,
                           absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> made,
                           gdrstore_buffer** out);

// gdrstore_get / gdrstore_put on client or cluster `store` (the old gdrstore_cluster_get /
// _put too: `buffer_what` names the buffer argument in refusals); kReadSync is a put with sync.
gdrstore_status StoreOp(const void* store, gdrstore::OpKind kind, const char* volume,
                        uint64_t offset, uint64_t n, const void* buffer,
                        const char* buffer_what, size_t buffer_offset, gdrstore_result* result);

// Marks the store closed (its streams take no new op, and none opens) and waits for every op
// of its open streams to be answered; their answers stay for gdrstore_poll (c_api_stream.cc).
void EndStreams(StoreLife& life);

}  // namespace gdr::capi
