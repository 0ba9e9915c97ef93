// The one interface a caller stores through, whatever is behind it: one daemon (or gdragent)
// through a Client, or a cluster of daemons through a ClusterClient. Code that moves bytes,
// lists volumes or makes them takes a Store& and does not ask which it has.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdrstore/types.h"

namespace gdrstore {

class Buffer;
class Client;

// What one op asks for beyond the Client's settings. A default OpOptions is the Client's
// ClientOptions as they are.
struct OpOptions {
  // When the op fails DEADLINE_EXCEEDED unless answered; other ops are unaffected. Unset:
  // ClientOptions::rpc_timeout from the submit (none when zero); time_point::max(): none.
  std::optional<std::chrono::system_clock::time_point> deadline = std::nullopt;
  // Whether the daemon's CRC32C of the op's bytes is asked for and checked against the buffer
  // (DATA_LOSS naming both values on a mismatch). Unset: ClientOptions::crc32c.
  std::optional<bool> crc32c = std::nullopt;
  // A put (OpKind::kRead) answered only once the extent is msync'ed to a file-backed volume's
  // file, as OpKind::kReadSync. A get (kWrite) with sync fails INVALID_ARGUMENT.
  bool sync = false;

  // The deadline `timeout` from now.
  static OpOptions WithTimeout(std::chrono::milliseconds timeout) {
    OpOptions o;
    o.deadline = std::chrono::system_clock::now() + timeout;
    return o;
  }
};

// A volume as a Store shows it: a daemon's volume, or a cluster volume (its logical size).
struct StoreVolume {
  std::string name;
  uint64_t size = 0;
  // A daemon's "memory" / "file:<path>"; a cluster's "cluster: R x STRIPE over N members".
  std::string backing;
};

// What CreateVolume makes. A daemon makes `name` of `size` bytes (a file in its writable
// --volume-dir with `file`; `media` as --volume's). A cluster makes a volume on each of
// `members` (empty: every member present) big enough that the cluster volume holds `size`,
// striped by `stripe_unit` with `replicas` copies; a daemon refuses those fields.
struct StoreVolumeSpec {
  std::string name;
  uint64_t size = 0;
  bool file = false;
  std::string media;
  uint64_t stripe_unit = 0;  // cluster only; 0: 1 MiB
  uint32_t replicas = 1;     // cluster only
  std::vector<std::string> members;  // cluster only
};

// Implemented by Client and ClusterClient; every method is thread-safe. Buffers come from the
// Store that uses them: another Store's Buffer is refused (INVALID_ARGUMENT). A Buffer may
// outlive its Store (see Buffer).
class Store {
 public:
  virtual ~Store() = default;

  // Host memory the library allocates (page aligned, zeroed), device memory on GPU `gpu`, or
  // memory the caller owns registered in place (it must outlive the Buffer): Client's calls of
  // the same names, on the Client that registers this Store's memory (RegisteringClient), with
  // their errors. A cluster's is its first member's, connected now when none is yet
  // (UNAVAILABLE naming each member tried when none can be).
  absl::StatusOr<std::unique_ptr<Buffer>> AllocateBuffer(size_t bytes);
  absl::StatusOr<std::unique_ptr<Buffer>> AllocateGpuBuffer(const std::string& gpu, size_t bytes);
  absl::StatusOr<std::unique_ptr<Buffer>> RegisterHostMemory(void* p, size_t bytes);
  absl::StatusOr<std::unique_ptr<Buffer>> RegisterGpuMemory(uint64_t device_ptr, size_t bytes);

  // Async: kRead / kReadSync is a put, kWrite a get (the wire's names). `done` runs once, on a
  // library thread (or this one, for an op refused before it is sent), with the errors above.
  // The Store must outlive the callback's start; destroying it fails ops in flight CANCELLED.
  virtual void SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer,
                           size_t buffer_offset, OpCallback done,
                           const OpOptions& options) = 0;

  // SubmitAsync, waited for: the op's OpResult (bytes, path; a cluster's service_ns is 0).
  absl::StatusOr<OpResult> Submit(OpKind kind, const Extent& extent, const Buffer& buffer,
                                  size_t buffer_offset = 0, const OpOptions& options = {}) {
    std::promise<absl::StatusOr<OpResult>> answered;
    std::future<absl::StatusOr<OpResult>> answer = answered.get_future();
    SubmitAsync(
        kind, extent, buffer, buffer_offset,
        [&answered](absl::StatusOr<OpResult> r) { answered.set_value(std::move(r)); }, options);
    return answer.get();
  }

  // Blocking: buffer -> store (put) / store -> buffer (get) of [offset, +length) of `volume`
  // from [buffer_offset, +length) of `buffer` (Submit of a kRead / kWrite). INVALID_ARGUMENT
  // for a range outside the buffer, another Store's buffer, or sync on a get; NOT_FOUND /
  // OUT_OF_RANGE for an unknown volume or an extent past its end; a cluster's first failed
  // piece's error.
  absl::Status Put(const std::string& volume, uint64_t offset, uint64_t length,
                   const Buffer& buffer, size_t buffer_offset = 0, const OpOptions& options = {}) {
    return Submit(OpKind::kRead, Extent{volume, offset, length}, buffer, buffer_offset, options)
        .status();
  }
  absl::Status Get(const std::string& volume, uint64_t offset, uint64_t length,
                   const Buffer& buffer, size_t buffer_offset = 0, const OpOptions& options = {}) {
    return Submit(OpKind::kWrite, Extent{volume, offset, length}, buffer, buffer_offset, options)
        .status();
  }

  // The volumes this caller may use, in name order.
  virtual absl::StatusOr<std::vector<StoreVolume>> ListVolumes() = 0;
  // Makes a volume (StoreVolumeSpec); the store's refusal, naming the field or the member.
  virtual absl::Status CreateVolume(const StoreVolumeSpec& spec) = 0;
  // Deletes volume `name` (a cluster: its layout, then the members' volumes), its file too with
  // `delete_file`. NOT_FOUND when there is none.
  virtual absl::Status DeleteVolume(const std::string& name, bool delete_file) = 0;

  // The first hop of ops on `buffer` ("tcp/host", "rc:mlx5_0/dma-buf"); "" for another
  // Store's buffer.
  virtual std::string PathOf(const Buffer& buffer) const = 0;
  // The Client whose registrations this Store's ops accept: itself, or a cluster's first
  // member's (which every member shares).
  virtual absl::StatusOr<Client*> RegisteringClient() = 0;
  // What this Store is connected to: "daemon HOST:PORT" or "cluster etcd://..." / "cluster
  // FILE".
  virtual std::string ConnectedTo() const = 0;
};

}  // namespace gdrstore
