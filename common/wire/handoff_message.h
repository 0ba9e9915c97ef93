// The handoff protocol: how a process on the same host hands memory to gdrstored (the local
// transport) or to gdragent (the node agent) without copying it, over a Unix SOCK_SEQPACKET
// socket. One message per packet: a fixed header, then the body of its type, little-endian;
// descriptors (a memfd, a VMM allocation's fd, a gRPC channel's socket) ride as SCM_RIGHTS.
// Requests come from the client and each gets exactly one reply with its request id.
//
//   client                          server
//   HELLO{name}                 ->
//                               <-  HELLO_OK{session, key, server}
//   REGISTER{...} [+fd]         ->
//                               <-  REGISTERED{rkey, region bytes} | ERROR{code, message}
//   DEREGISTER{rkey}            ->
//                               <-  DEREGISTERED | ERROR
//   OPEN_CHANNEL                ->  (agent only: a socket to speak gRPC to the agent on)
//                               <-  CHANNEL_OPEN +fd | ERROR
//   REGISTER_CHUNK{size} +fd    ->  (one per VMM allocation of a range mapped from several)
//                               <-  CHUNK_STAGED{staged} | ERROR
//   REGISTER{gpu-vmm-chunks}    ->  (takes the chunks staged so far, in order)
//                               <-  REGISTERED | ERROR
// A GPU range can span several VMM allocations mapped side by side (PyTorch's expandable
// segments map a tensor's memory in 20 MiB chunks): each allocation has its own descriptor, so
// the client stages them one per REGISTER_CHUNK and a REGISTER of kind gpu-vmm-chunks maps them
// side by side, as they lie in the client. A REGISTER of another kind, or the session's end,
// drops what is staged.
// The server makes the channel's socket pair and hands the client its end: a socket whose file
// the client shares cannot have its flags (O_NONBLOCK) changed under the server's gRPC poller.
//
// Decode checks everything a hostile peer controls (magic, version, type, lengths, enum values,
// string sizes, the number of descriptors a type carries) and names what is wrong.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::handoff {

inline constexpr uint32_t kMagic = 0x48524447;  // "GDRH" read as little-endian bytes
inline constexpr uint16_t kVersion = 1;
// No message is longer; the receiver reads at most this many bytes and one descriptor.
inline constexpr size_t kMaxMessageBytes = 1024;
inline constexpr size_t kMaxFds = 1;
inline constexpr size_t kMaxNameBytes = 128;
inline constexpr size_t kMaxErrorBytes = 512;
inline constexpr size_t kKeyBytes = 16;
inline constexpr size_t kIpcHandleBytes = 64;  // sizeof(CUipcMemHandle)

enum class MessageType : uint16_t {
  kHello = 1,
  kHelloOk = 2,
  kRegister = 3,
  kRegistered = 4,
  kDeregister = 5,
  kDeregistered = 6,
  kOpenChannel = 7,
  kChannelOpen = 8,
  kError = 9,
  kRegisterChunk = 10,
  kChunkStaged = 11,
};

// How a region's memory is handed over.
enum class MemoryKind : uint8_t {
  kHostMemfd = 1,  // + a memfd (or any mmap-able regular-file fd); `offset` into it
  kGpuIpc = 2,     // a CUDA IPC handle of a cuMemAlloc allocation; no fd
  kGpuVmmFd = 3,   // a VMM allocation exported as a POSIX fd (cuMemExportToShareableHandle); + fd
  kGpuVmmChunks = 4,  // VMM allocations mapped side by side, staged by REGISTER_CHUNK; no fd
};

// The most chunks one region may be staged from: 4096 of PyTorch's 20 MiB chunks is 80 GiB.
inline constexpr uint32_t kMaxChunks = 4096;

// "host-memfd", "gpu-ipc", "gpu-vmm-fd", "gpu-vmm-chunks".
const char* MemoryKindName(MemoryKind kind);

struct Hello {
  std::string name;  // what the client calls itself, for logs; <= kMaxNameBytes
};

struct HelloOk {
  uint64_t session = 0;                  // nonzero
  std::array<uint8_t, kKeyBytes> key{};  // the LocalEndpoint key of every op of the session
  std::string server;                    // "gdrstored 1.4.0" / "gdragent 1.4.0"; <= kMaxNameBytes
};

struct Register {
  MemoryKind kind = MemoryKind::kHostMemfd;
  bool writable = true;      // false: the server may read the region (put), never write it
  uint64_t address = 0;      // the region's start in the client's address space (descriptors)
  uint64_t size = 0;         // region bytes, > 0
  // Where the region starts in what the handle names: bytes into the memfd, or from the GPU
  // allocation's base (an interior pointer).
  uint64_t offset = 0;
  // GPU kinds: the whole allocation's bytes (what the importer maps; for gpu-vmm-chunks the sum
  // of the staged chunks', `offset` counting from the first's base); host: 0.
  uint64_t allocation_size = 0;
  std::array<uint8_t, kIpcHandleBytes> ipc_handle{};  // kGpuIpc only
  std::string gpu;  // GPU kinds: the GPU's PCI address "0000:b7:00.0"; <= 32 bytes
};

struct Registered {
  uint32_t rkey = 0;  // names the region in descriptors (RemoteBuffer.rkey); nonzero
};

struct Deregister {
  uint32_t rkey = 0;
};

// One VMM allocation of a range mapped from several; its shareable descriptor rides along.
struct RegisterChunk {
  uint64_t size = 0;  // the allocation's bytes, > 0
};

struct ChunkStaged {
  uint32_t staged = 0;  // chunks the session has staged for its next REGISTER, this one included
};

struct OpenChannel {};
struct ChannelOpen {};
struct Deregistered {};

struct Error {
  uint32_t code = 0;  // an absl::StatusCode, never OK
  std::string message;  // <= kMaxErrorBytes
};

// In wire order: the alternative's index + 1 is its MessageType.
using Body = std::variant<Hello, HelloOk, Register, Registered, Deregister, Deregistered,
                          OpenChannel, ChannelOpen, Error, RegisterChunk, ChunkStaged>;

struct Message {
  uint32_t request_id = 0;  // chosen by the client; echoed by the reply
  Body body;
};

MessageType TypeOf(const Body& body);
const char* MessageTypeName(MessageType type);

// How many descriptors a message of this type (and memory kind) must carry: 1 for REGISTER of
// kHostMemfd/kGpuVmmFd, REGISTER_CHUNK and CHANNEL_OPEN, else 0.
size_t FdsFor(const Body& body);

// The packet for `message` (at most kMaxMessageBytes; strings are cut to their limits).
std::string Encode(const Message& message);

// Parses one packet that arrived with `fd_count` descriptors. INVALID_ARGUMENT naming the field
// (bad magic or version, unknown type or memory kind, a length past the packet, a string over
// its limit, trailing bytes, a zero size or rkey, the wrong number of descriptors for the type).
absl::StatusOr<Message> Decode(absl::string_view packet, size_t fd_count);

// The request id of a packet whose header is sound (long enough, right magic and version),
// whatever its body: so a receiver can answer a bad request with an ERROR the sender can match.
// nullopt when even the header is not this protocol's.
std::optional<uint32_t> RequestIdOf(absl::string_view packet);

}  // namespace gdr::handoff
