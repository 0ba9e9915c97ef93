// libgdrclient: the client side of gdrstored. Connects to a daemon, allocates and registers
// memory the daemon may access one-sidedly, and issues Write (store -> buffer) and Read
// (buffer -> store) ops, unary or over a Stream, async or blocking.
//
// On the rc transport the library opens an RDMA device, connects passive RC QPs to the daemon
// through the Connect RPC (the call lasts as long as the Client) and registers buffers with
// ibv_reg_mr; the daemon reads and writes them with one-sided RDMA. On dc it creates an mlx5
// DC target instead, which the daemon's DC initiators reach without any connection.
//
// On the tcp transport the library runs a small target in this process (a listening socket and
// one thread per daemon link) that owns the registered regions, gives each a random rkey, and
// checks rkey and bounds on every access before touching memory.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdrstore/store.h"
#include "gdrstore/types.h"
#include "gdrstore/v1/gdrstore.pb.h"

// The library's internals (client/src/), which the classes below hold by pointer only. The
// gRPC channel and stub stay among them: callers need no gRPC headers.
namespace grpc {
class Channel;
}  // namespace grpc
namespace gdr {
class AdmissionWindow;
class ClientAccess;
class ClientCalls;
class ClientTransport;
class DeadlineTimer;
class OpGate;
class Registration;
class RegistrationCache;
struct DaemonRpc;
struct Region;
struct Requirement;
}  // namespace gdr

namespace gdrstore {

class Client;

// Registered memory: host memory or device memory on a GPU, allocated by the library or owned
// by the caller (Client::RegisterHostMemory). The destructor waits for the ops submitted on the
// buffer to finish, then lets go of its registration, which is withdrawn (and memory the
// library allocated freed) once no Buffer views it. A Buffer may outlive its Client: its
// memory stays valid (CopyIn / CopyOut work) until the Buffer goes. Not copyable; every
// method is safe to call from any thread.
class Buffer {
 public:
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Host memory: its address. GPU memory: nullptr (use CopyIn/CopyOut; a device pointer is
  // never dereferenced on the host).
  std::byte* data() const;
  size_t size() const;
  uint32_t rkey() const;
  // False for caller-owned host memory mapped read-only: puts (OpKind::kRead) only.
  bool writable() const;
  // The address the daemon's descriptors name (the RDMA iova; the CUdeviceptr on a GPU).
  uint64_t address() const;

  bool on_gpu() const;
  int gpu_ordinal() const;             // -1 for host memory
  const std::string& gpu_pci() const;  // "0000:b7:00.0"; empty for host memory
  // RDMA device nearest the GPU (or ClientOptions::rdma_device); empty when none was found.
  const std::string& rdma_device() const;

  // Copies between host memory and [offset, offset+n) of the buffer (cuMemcpy for GPU
  // memory). OUT_OF_RANGE outside the buffer; the driver's error for a failed copy.
  absl::Status CopyIn(size_t offset, const void* src, size_t n) const;
  absl::Status CopyOut(size_t offset, void* dst, size_t n) const;

 private:
  friend class Client;
  friend class OpStream;
  friend class gdr::ClientAccess;
  // A view of [offset, offset + size) of `registration`'s region.
  Buffer(std::shared_ptr<gdr::Registration> registration, size_t offset, size_t size);
  // `done` wrapped to count the op as in flight on this buffer until it is answered, and for a
  // get (kWrite) to run the memory's write fence first.
  OpCallback Track(OpKind kind, OpCallback done) const;
  std::shared_ptr<gdr::Registration> registration_;
  size_t offset_ = 0;
  size_t size_ = 0;
  std::shared_ptr<gdr::OpGate> gate_;
  std::string gpu_pci_;
  std::string rdma_device_;
};

// Many ops over Stream RPCs: StreamOptions::calls of them (ClientOptions::stream_calls, 4), each
// op on the next in turn, whole (its pieces, when split, all on one). Submit is thread-safe and
// never blocks; callbacks run on gRPC threads (or the client's timer thread, for a deadline),
// once per op, in completion order.
// Any number of ops may be submitted: those the daemon would not admit yet wait in the client
// (ClientOptions::fail_when_full). Each op has a deadline, OpOptions::deadline, else
// ClientOptions::rpc_timeout from its Submit: one not answered by then fails DEADLINE_EXCEEDED
// (its buffer's bytes are then undefined until an answered op rewrites them); the stream's
// other ops go on.
//
// An OpStream may outlive its Client (closed or destroyed in either order): destroying the
// Client cancels the calls (ops in flight fail CANCELLED, naming the Client's close); Submit
// then fails FAILED_PRECONDITION, and Close returns the calls' final status (the first error of
// them, in the order they were opened).
class OpStream {
 public:
  ~OpStream();  // Close()
  OpStream(const OpStream&) = delete;
  OpStream& operator=(const OpStream&) = delete;

  // INVALID_ARGUMENT (via callback) when [buffer_offset, +extent.length) is outside `buffer`
  // or `options` do not fit the op (OpOptions); after the op's call has failed, its error
  // (e.g. PERMISSION_DENIED when the daemon refused the token); FAILED_PRECONDITION after Close
  // or a clean end, or once the Client is gone.
  void Submit(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
              OpCallback done, const OpOptions& options = {});
  // Half-closes, waits until every submitted op has been answered or has failed at its
  // deadline, and for the daemon to end each call (cancelling one the daemon does not end within
  // rpc_timeout, or once an op went unanswered on it); the first call's error, else OK. Again
  // after that (or after the Client is gone): the same status, at once.
  absl::Status Close();

 private:
  friend class Client;
  class Reactor;  // one Stream call (op_stream.cc)
  // The OpStream's share of its Reactors, which the Client's list of calls reaches too, so that
  // a Client destroyed first ends the calls (client_calls.h).
  struct Hold;
  explicit OpStream(std::unique_ptr<Hold> hold);
  std::unique_ptr<Hold> hold_;
};

class Client : public Store {
 public:
  // Creates the channel and opens the transport: tcp starts the in-process target and does not
  // contact the daemon (use GetInfo or Ping to check it); rc opens the RDMA device and runs
  // the Connect handshake; dc opens the device and creates the DCT; auto asks the daemon
  // (GetInfo) and tries dc, rc, tcp in turn. INVALID_ARGUMENT on a bad address, UNAVAILABLE
  // when the target cannot listen, the device's or the handshake's error otherwise.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  // Closes the transport (tcp: daemon links see EOF; rc: the Connect call ends) and the
  // channel. Ops still running fail: ops waiting for room and Streams' ops in flight with
  // CANCELLED (the Streams, Buffers and futures of the Client may outlive it; see OpStream and
  // Buffer); unary calls in flight are cancelled. Returns once no Stream's call is running and
  // nothing of the library uses the Client any more. Not from one of its ops' callbacks.
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Page-aligned host memory, zero-filled, registered with a fresh random rkey.
  absl::StatusOr<std::unique_ptr<Buffer>> AllocateBuffer(size_t bytes);

  // Device memory on the GPU `gpu` names: a PCI address ("0000:b7:00.0"), its short form
  // ("b7:00.0", domain 0) or a CUDA ordinal ("0"). cuMemAlloc in the GPU's primary context
  // with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, zero-filled, registered with a fresh rkey.
  // INVALID_ARGUMENT for a malformed name, NOT_FOUND listing the GPUs present when none
  // matches, FAILED_PRECONDITION when this host has no NVIDIA driver (or this build no CUDA
  // support), RESOURCE_EXHAUSTED when the GPU is full. On tcp the in-process target copies
  // through pinned staging buffers; on rc / dc the NIC registers the memory itself (dma-buf
  // first, nvidia-peermem second) and FAILED_PRECONDITION says which module or feature is
  // missing when neither works.
  absl::StatusOr<std::unique_ptr<Buffer>> AllocateGpuBuffer(const std::string& gpu, size_t bytes);

  // Host memory the caller owns, [p, p + n), registered in place: nothing is copied and the
  // memory stays the caller's, who must keep it alive until the Buffer is destroyed. A range
  // inside one this Client registered before (and still holds a Buffer on) reuses that
  // registration, at no cost. INVALID_ARGUMENT naming the address when the range is empty or
  // not mapped in this process; memory mapped read-only registers for puts only (a get into it
  // fails PERMISSION_DENIED).
  absl::StatusOr<std::unique_ptr<Buffer>> RegisterHostMemory(void* p, size_t n);

  // Device memory the caller owns (cuMemAlloc, a torch tensor's or a CuPy array's storage),
  // [device_ptr, device_ptr + n), registered in place; the GPU is found from the pointer. The
  // NIC registers it as it does AllocateGpuBuffer's memory (rc/dc: dma-buf first, then
  // nvidia-peermem); the tcp target stages through pinned memory. Reuse and lifetime as for
  // RegisterHostMemory. INVALID_ARGUMENT naming the pointer when it is not device memory (host
  // memory, freed) or the range runs past the end of its allocation.
  absl::StatusOr<std::unique_ptr<Buffer>> RegisterGpuMemory(uint64_t device_ptr, size_t n);

  // Memory this process was handed (mapped at `p`, or at `device_ptr` on a GPU), registered
  // with how it was handed (HandedOver): over transport local the daemon gets the same memfd,
  // IPC handle or VMM descriptor. Never shared with other registrations. As the calls above
  // otherwise; INVALID_ARGUMENT for a kind that does not match the memory.
  absl::StatusOr<std::unique_ptr<Buffer>> RegisterHandedOver(void* p, uint64_t device_ptr,
                                                             size_t n, const HandedOver& from);

  // Registrations made and handed out again (RegisterHostMemory hits), and how many are live.
  struct RegistrationStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t live = 0;
  };
  RegistrationStats registration_stats() const;

  // The descriptor a request carries for [offset, offset+length) of `buffer`.
  // INVALID_ARGUMENT when the range is outside the buffer.
  absl::StatusOr<v1::RemoteBuffer> Describe(const Buffer& buffer, size_t offset,
                                            size_t length) const;
  // The same on rail `rail` (< the rails in use; 0 without rails).
  absl::StatusOr<v1::RemoteBuffer> Describe(const Buffer& buffer, size_t offset, size_t length,
                                            int rail) const;

  // Async unary op; `done` runs once on a gRPC thread (or the client's timer thread). As on a
  // Stream, any number may be in flight at once: what the daemon would not admit waits, each
  // op within its deadline (OpOptions::deadline, else rpc_timeout from this call). Errors as
  // OpStream::Submit's, through `done`; INVALID_ARGUMENT for a Buffer this Client (or a Client
  // sharing its registrations) did not register.
  void SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                   OpCallback done, const OpOptions& options = {}) override;
  std::future<absl::StatusOr<OpResult>> SubmitAsync(OpKind kind, const Extent& extent,
                                                    const Buffer& buffer, size_t buffer_offset,
                                                    const OpOptions& options = {});
  // Blocking wrappers: a get (kWrite) and a put (kRead; kReadSync with options.sync).
  absl::StatusOr<OpResult> Write(const Extent& extent, const Buffer& buffer,
                                 size_t buffer_offset = 0, const OpOptions& options = {});
  absl::StatusOr<OpResult> Read(const Extent& extent, const Buffer& buffer,
                                size_t buffer_offset = 0, const OpOptions& options = {});
  // Store: GetInfo's volumes; CreateVolume above with the spec's fields (INVALID_ARGUMENT for
  // a cluster's: members, replicas > 1, a stripe unit); "daemon HOST:PORT"; this Client
  // registers its own memory.
  absl::StatusOr<std::vector<StoreVolume>> ListVolumes() override;
  absl::Status CreateVolume(const StoreVolumeSpec& spec) override;
  std::string ConnectedTo() const override;
  absl::StatusOr<Client*> RegisteringClient() override { return this; }

  // INVALID_ARGUMENT for options out of range (StreamOptions), naming the field.
  absl::StatusOr<std::unique_ptr<OpStream>> OpenStream(const StreamOptions& options = {});
  // The daemon's GetInfo (gdragent's, through the agent) with every volume the caller may see,
  // in name order: the pages (gdrstore.proto GetInfoRequest) asked for in turn and joined, the
  // other fields as the first page had them. `timeout` bounds all the pages together.
  absl::StatusOr<v1::GetInfoResponse> GetInfo(std::chrono::milliseconds timeout =
                                                  std::chrono::milliseconds(10000));
  // GetInfo with `volumes` holding `volume` alone, or nothing when the daemon shows the caller
  // no volume of that name: one small answer however many volumes it serves. INVALID_ARGUMENT
  // for an empty name, and from the daemon when `volume` is no volume name.
  absl::StatusOr<v1::GetInfoResponse> GetVolumeInfo(const std::string& volume,
                                                    std::chrono::milliseconds timeout =
                                                        std::chrono::milliseconds(10000));
  // The daemon's GetStats (gdragent's, through the agent), its pages joined (as GetInfo).
  absl::StatusOr<v1::GetStatsResponse> GetStats(std::chrono::milliseconds timeout =
                                                    std::chrono::milliseconds(10000));
  // The daemon's volumes at run time, through its Admin service (an admin=yes token when it
  // has a token file; docs/operations.md "Volumes at run time"): a memory volume, or with
  // `file` one in its writable --volume-dir; `media` as --volume's options. Returns whether a
  // file was made now (false: an existing file of the size is served). The daemon's refusal,
  // naming the field. Not through gdragent (UNIMPLEMENTED).
  absl::StatusOr<bool> CreateVolume(const std::string& name, uint64_t size, bool file = false,
                                    const std::string& media = "",
                                    std::chrono::milliseconds timeout =
                                        std::chrono::milliseconds(120000));
  absl::Status DeleteVolume(const std::string& name, bool delete_file = false) override;
  absl::Status Ping();
  // The same, async: `done` runs once, on a gRPC thread, with the answer or the error
  // (DEADLINE_EXCEEDED after 10 s; CANCELLED when the Client goes first).
  void Ping(std::function<void(absl::Status)> done);
  // One GetInfo call for `request` (one page: gdrstore.proto GetInfoRequest), async, for
  // callers that page themselves: `done` runs once, on a gRPC thread, with the answer or the
  // call's error (DEADLINE_EXCEEDED past `deadline`; CANCELLED when the Client goes first).
  void GetInfo(const v1::GetInfoRequest& request, std::chrono::system_clock::time_point deadline,
               std::function<void(absl::StatusOr<v1::GetInfoResponse>)> done);

  std::chrono::milliseconds rpc_timeout() const { return options_.rpc_timeout; }
  // Ops that waited in this process for room under the daemon's limits, and that were sent
  // again after the daemon did not admit them (zero with fail_when_full).
  struct WindowStats {
    uint64_t waited = 0;
    uint64_t resent = 0;
    bool limits_known = false;  // the daemon's GetInfo limits have arrived
  };
  WindowStats window_stats() const;
  bool crc32c() const { return options_.crc32c; }
  // The transport in use: its kind, a line describing it, and what it reports (the tcp
  // target's address and counters, the rc connection, the DCT, the rails, auto's notes).
  TransportInfo transport_info() const;
  // The first hop of every op on `buffer` (OpResult::path begins with it): "tcp/host",
  // "rc:mlx5_0/dma-buf", "local/cuda-ipc", "agent/vmm-fd" (docs/python.md "Paths").
  std::string PathOf(const Buffer& buffer) const override;

 private:
  // Internal code (the op dispatch, the Stream, the cluster's member links) reaches the
  // Client's parts through gdr::ClientAccess (client/src/client_access.h).
  friend class gdr::ClientAccess;
  friend class OpStream;
  Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  // The RDMA device GPU buffers on `gpu_pci` use: ClientOptions::rdma_device, else the nearest
  // on the PCIe tree; empty when none is found.
  std::string NicFor(const std::string& gpu_pci) const;
  void SubmitOne(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                 int rail, bool crc32c, std::chrono::system_clock::time_point deadline,
                 OpCallback done);
  // options.deadline when set, else now + rpc_timeout, or time_point::max() without one.
  std::chrono::system_clock::time_point DeadlineOf(const OpOptions& options) const;
  // Sends one piece through the admission window (at once with fail_when_full): `send` gets
  // the piece's deadline and the callback to answer. `stream`: the Stream's share of the
  // window (its own limit), nullptr for unary calls.
  using PieceSend =
      std::function<void(std::chrono::system_clock::time_point deadline, OpCallback done)>;
  void Admit(void* stream, uint64_t bytes, std::chrono::system_clock::time_point deadline,
             PieceSend send, OpCallback done);
  // Asks the daemon for its limits (async) and gives them to the window.
  void FetchLimits();
  // The window's refusal hook, and the limits from `info` (the connect's GetInfo answer) when
  // there is one, else fetched.
  void StartWindow(const v1::GetInfoResponse* info);
  // Parses options_.require and checks what connecting decided (the transport, the agent).
  absl::Status ApplyRequirement();
  // transport_->Register, then for GPU memory the requirement on how it is reached: the
  // registration is withdrawn and the reason returned when the way falls short.
  absl::StatusOr<std::function<void()>> RegisterRegion(const std::shared_ptr<gdr::Region>& region);
  ClientOptions options_;
  std::unique_ptr<gdr::DaemonRpc> rpc_;  // the channel and the stub (client/src/daemon_rpc.h)
  // tcp, rc or dc behind one interface; shared with the registrations that need it alive (and,
  // in a cluster, with the other members' Clients).
  std::shared_ptr<gdr::ClientTransport> transport_;
  std::shared_ptr<gdr::RegistrationCache> registrations_;
  std::string auto_notes_;
  std::shared_ptr<const gdr::Requirement> required_;  // null without ClientOptions::require
  // Runs op deadlines and the window's pauses; declared before what schedules on it.
  std::shared_ptr<gdr::DeadlineTimer> timer_;
  std::shared_ptr<gdr::AdmissionWindow> window_;  // null with fail_when_full
  // The Streams and calls in flight, ended first when the Client goes. Last, so that the
  // members above keep their places (rpc_timeout() and crc32c() are inline).
  std::shared_ptr<gdr::ClientCalls> calls_;
};

}  // namespace gdrstore
