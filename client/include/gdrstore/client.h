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
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdrstore {

// How the daemon reaches this process's memory.
enum class Transport {
  kTcp,  // the library's software target (any host)
  kRc,   // reliable-connected RDMA QPs on a verbs device (RoCE, InfiniBand, SoftRoCE)
  kDc,   // an mlx5 DC target (DCT) the daemon's DC initiators reach; ConnectX-5 or later
  kAuto, // dc where the daemon offers it and this device can, else rc, else tcp
};

// "tcp", "rc", "dc", "auto".
const char* TransportName(Transport t);
// The inverse of TransportName; nullopt for any other name.
std::optional<Transport> ParseTransport(const std::string& name);

struct ClientOptions {
  Transport transport = Transport::kTcp;
  // gdrstored's gRPC address, HOST:PORT.
  std::string daemon_address = "127.0.0.1:50051";
  // Address the daemon uses to reach this process's tcp target. Empty: 127.0.0.1 when the
  // daemon is on loopback, otherwise this host's address on the route to the daemon.
  std::string target_host;
  // Port of the tcp target; 0 picks an ephemeral one.
  uint16_t target_port = 0;
  // Connections the target accepts at once (daemon links); more are refused.
  uint32_t max_target_connections = 256;
  // Deadline of each data RPC; zero means none.
  std::chrono::milliseconds rpc_timeout{120000};
  // RDMA device by name. rc: the device the QPs and buffers use (empty: the first device with
  // an ACTIVE port, or the one rdma_address names). GPU buffers: the device they are registered
  // with (empty: the one nearest each GPU on the PCIe tree, read from sysfs_root).
  std::string rdma_device;
  std::string sysfs_root = "/sys";
  // Pinned staging ring per daemon link for GPU buffers on the tcp transport.
  size_t gpu_staging_slot_bytes = 1 << 20;
  int gpu_staging_slots = 4;
  // rc: the RDMA device by a local IP address on it (instead of rdma_device). GID index -1:
  // the port's RoCE v2 IPv4-mapped entry.
  std::string rdma_address;
  int rdma_gid_index = -1;
  // rc: QPs offered to the daemon (it connects up to its per-client limit).
  uint32_t rc_qps = 2;
  // Bearer token sent on every call (metadata `authorization: Bearer <token>`), for daemons
  // started with --token-file. Empty: none sent.
  std::string token;
  // TLS to the daemon (gdrstored --tls-cert): on when tls_ca or tls_cert is set. tls_ca: PEM
  // file of the CA(s) the daemon's certificate must chain to (empty: the system's roots).
  // tls_cert / tls_key: this client's certificate and key, for daemons that require client
  // certificates (--tls-client-ca). tls_server_name: the name checked against the daemon's
  // certificate instead of the host of daemon_address (e.g. when connecting by IP address to a
  // certificate issued for a DNS name). Files are read and checked by Connect.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  // rc over several RDMA devices ("rails"): the local devices to use, or {"auto"} for every
  // one with an ACTIVE port. Empty: one device (rdma_device) as without rails. Each is paired
  // with a daemon rail it reaches (RoCE: on the same IPv4 subnet); one that reaches none is
  // left out. Buffers are registered on every rail; an op below slice_bytes goes to the rail
  // nearest its buffer, a larger one is cut into slice_bytes pieces spread over the rails in
  // proportion to their speed; a piece whose rail fails is resubmitted once on another rail,
  // and the failed rail is passed over for rail_retry.
  std::vector<std::string> rails;
  size_t slice_bytes = 1 << 20;
  std::chrono::milliseconds rail_retry{1000};
  // Ask the daemon for the CRC32C of every op's bytes (as they are in the store once the op
  // has completed) and check it against the buffer: a mismatch fails the op with DATA_LOSS
  // naming both values. Host buffers are checked in place, GPU buffers through a copy to host
  // memory; each slice of a sliced op is checked on its own.
  bool crc32c = false;
  // Ops the daemon would not admit yet (its in-flight limits, as GetInfo states them: ops per
  // Stream, ops and bytes daemon-wide) wait in this process until answers free room, within
  // each op's deadline. true: such an op fails at once with RESOURCE_EXHAUSTED instead.
  bool fail_when_full = false;
};

// One rail of a Client (ClientOptions::rails): what went over it.
struct RailStats {
  std::string device;        // local device, "rxe1"
  std::string daemon_rail;   // the daemon's device and port it is paired with
  uint64_t speed_mbps = 0;   // the weight it gets in striping
  uint64_t ops = 0;          // slices completed on it
  uint64_t bytes = 0;
  uint64_t errors = 0;       // slices that failed on it
  uint64_t resubmitted = 0;  // slices that failed elsewhere and were completed here
  bool passed_over = false;  // failed recently: skipped until rail_retry has passed
};

// What this process's tcp target has done so far (all links).
struct TargetStats {
  uint64_t refused = 0;                 // requests answered with an error
  uint64_t gpu_bytes_to_device = 0;     // staged into GPU buffers
  uint64_t gpu_bytes_from_device = 0;   // staged out of GPU buffers
  uint64_t gpu_copy_ns = 0;             // GPU time of those copies
  uint64_t gpu_wait_ns = 0;             // link threads' time blocked on them
};

// The rc connection of a Client, for display.
struct RdmaLocalInfo {
  std::string device;      // "rxe0"
  uint32_t port = 0;
  std::string port_state;  // "ACTIVE"
  int gid_index = 0;
  std::string gid;         // the GID, as an IP address when it is one
  uint32_t mtu = 0;        // active MTU, bytes
  uint32_t qps = 0;        // QPs connected to the daemon
  uint64_t connection_id = 0;
  std::string daemon_device;  // the daemon's device and port
  uint64_t qp_resets = 0;     // QPs reconnected after a daemon-side error
};

// A range of the daemon's store.
struct Extent {
  std::string volume;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct OpResult {
  uint64_t bytes = 0;       // bytes moved
  uint64_t service_ns = 0;  // daemon-side time
  bool synced = false;      // the answer waited for msync to the volume's file (kReadSync)
  // The daemon's CRC32C of the bytes (ClientOptions::crc32c), already checked against the
  // buffer; unset when not asked for, and for an op sent in slices (each slice was checked).
  std::optional<uint32_t> crc32c;
};

enum class OpKind {
  kWrite,     // daemon writes store bytes into the buffer
  kRead,      // daemon reads the buffer into the store
  kReadSync,  // kRead answered only once the extent is msync'ed to a file-backed volume's file
              // (survives a host crash; OpResult::synced says it happened)
};

using OpCallback = std::function<void(absl::StatusOr<OpResult>)>;

}  // namespace gdrstore

// The library's internals (client/src/), which the classes below hold by pointer only.
namespace gdr {
class AdmissionWindow;
class ClientTransport;
class DeadlineTimer;
class OpGate;
class Registration;
class RegistrationCache;
}  // namespace gdr

namespace gdrstore {

class Client;

// Registered memory: host memory or device memory on a GPU, allocated by the library or owned
// by the caller (Client::RegisterHostMemory). The destructor waits for the ops submitted on the
// buffer to finish, then lets go of its registration, which is withdrawn (and memory the
// library allocated freed) once no Buffer views it. Not copyable; every method is safe to call
// from any thread.
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

// Many ops over one Stream RPC. Submit is thread-safe and never blocks; callbacks run on gRPC
// threads (or the client's timer thread, for a deadline), once per op, in completion order.
// Any number of ops may be submitted: those the daemon would not admit yet wait in the client
// (ClientOptions::fail_when_full). Each op has a deadline, ClientOptions::rpc_timeout from its
// Submit unless given: one not answered by then fails DEADLINE_EXCEEDED (its buffer's bytes
// are then undefined until an answered op rewrites them).
class OpStream {
 public:
  ~OpStream();  // Close()
  OpStream(const OpStream&) = delete;
  OpStream& operator=(const OpStream&) = delete;

  // INVALID_ARGUMENT (via callback) when [buffer_offset, +extent.length) is outside `buffer`;
  // after the stream has failed, the call's error (e.g. PERMISSION_DENIED when the daemon
  // refused the token); FAILED_PRECONDITION after Close or a clean end.
  void Submit(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
              OpCallback done);
  // The same with its own deadline (time_point::max(): none).
  void Submit(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
              OpCallback done, std::chrono::system_clock::time_point deadline);
  // Half-closes, waits until every submitted op has been answered or has failed at its
  // deadline, and for the daemon to end the call (cancelling it when the daemon does not within
  // rpc_timeout, or once an op went unanswered); the call's final status.
  absl::Status Close();

 private:
  friend class Client;
  class Reactor;
  explicit OpStream(std::unique_ptr<Reactor> reactor);
  std::unique_ptr<Reactor> reactor_;
};

class Client {
 public:
  // Creates the channel and opens the transport: tcp starts the in-process target and does not
  // contact the daemon (use GetInfo or Ping to check it); rc opens the RDMA device and runs
  // the Connect handshake; dc opens the device and creates the DCT; auto asks the daemon
  // (GetInfo) and tries dc, rc, tcp in turn. INVALID_ARGUMENT on a bad address, UNAVAILABLE
  // when the target cannot listen, the device's or the handshake's error otherwise.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  // Closes the transport (tcp: daemon links see EOF; rc: the Connect call ends) and the
  // channel. Ops still running fail.
  ~Client();
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

  // Registrations made and handed out again (RegisterHostMemory hits), and how many are live.
  struct RegistrationStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t live = 0;
  };
  RegistrationStats registration_stats() const;

  TargetStats target_stats() const;

  // The descriptor a request carries for [offset, offset+length) of `buffer`.
  // INVALID_ARGUMENT when the range is outside the buffer.
  absl::StatusOr<v1::RemoteBuffer> Describe(const Buffer& buffer, size_t offset,
                                            size_t length) const;
  // The same on rail `rail` (< the rails in use; 0 without rails).
  absl::StatusOr<v1::RemoteBuffer> Describe(const Buffer& buffer, size_t offset, size_t length,
                                            int rail) const;

  // Async unary op; `done` runs once on a gRPC thread (or the client's timer thread). As on a
  // Stream, any number may be in flight at once: what the daemon would not admit waits, each
  // op within its deadline (rpc_timeout from this call).
  void SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                   OpCallback done);
  std::future<absl::StatusOr<OpResult>> SubmitAsync(OpKind kind, const Extent& extent,
                                                    const Buffer& buffer, size_t buffer_offset);
  // Blocking wrappers.
  absl::StatusOr<OpResult> Write(const Extent& extent, const Buffer& buffer,
                                 size_t buffer_offset = 0);
  absl::StatusOr<OpResult> Read(const Extent& extent, const Buffer& buffer,
                                size_t buffer_offset = 0, bool sync = false);

  absl::StatusOr<std::unique_ptr<OpStream>> OpenStream();
  absl::StatusOr<v1::GetInfoResponse> GetInfo(std::chrono::milliseconds timeout =
                                                  std::chrono::milliseconds(10000));
  absl::Status Ping();

  // For callers that build requests themselves.
  v1::GdrStore::Stub* stub() const { return stub_.get(); }
  std::chrono::milliseconds rpc_timeout() const { return options_.rpc_timeout; }
  // Ops that waited in this process for room under the daemon's limits, and that were sent
  // again after the daemon did not admit them (zero with fail_when_full).
  struct WindowStats {
    uint64_t waited = 0;
    uint64_t resent = 0;
    bool limits_known = false;  // the daemon's GetInfo limits have arrived
  };
  WindowStats window_stats() const;
  Transport transport() const { return options_.transport; }
  bool crc32c() const { return options_.crc32c; }
  // tcp only: where the target listens (empty / 0 on rc).
  const std::string& target_host() const;
  uint16_t target_port() const;
  // rc only: the device and connection in use; nullopt on tcp.
  std::optional<RdmaLocalInfo> rdma_info() const;
  // Per rail (ClientOptions::rails); empty without rails.
  std::vector<RailStats> rail_stats() const;
  // Notes on rails asked for and left out ("rxe1: reaches no daemon rail ..."); empty if none.
  std::string rail_notes() const;
  // dc only: the DCT number buffers are reached through (0 on tcp/rc). The access key is
  // never exposed except inside descriptors.
  uint32_t dct_number() const;
  // Why kAuto did not pick a faster transport ("dc: ...; rc: ..."); empty otherwise.
  const std::string& auto_notes() const { return auto_notes_; }

 private:
  Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  // The RDMA device GPU buffers on `gpu_pci` use: ClientOptions::rdma_device, else the nearest
  // on the PCIe tree; empty when none is found.
  std::string NicFor(const std::string& gpu_pci) const;
  friend class OpStream;
  // Sends an op as one piece, or as slices over the rails (retried once on another rail);
  // `piece(extent, buffer_offset, rail, done)` submits one piece on a rail. `done` runs once,
  // for the whole op. One rail calls `piece` directly: nothing is kept for a retry, so the
  // unary and Stream hot paths build no std::function.
  using PieceSubmit = std::function<void(const Extent&, size_t buffer_offset, int rail,
                                         OpCallback)>;
  template <typename Piece>
  void Dispatch(const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                OpCallback done, Piece&& piece) {
    if (OneRail()) {
      if (options_.crc32c) done = CrcChecked(buffer, buffer_offset, extent.length, std::move(done));
      piece(extent, buffer_offset, 0, std::move(done));
      return;
    }
    DispatchSlices(extent, buffer, buffer_offset, std::move(done),
                   PieceSubmit(std::forward<Piece>(piece)));
  }
  bool OneRail() const;
  // `done` behind a check of the answer's CRC32C against `length` bytes of `buffer` at `offset`.
  OpCallback CrcChecked(const Buffer& buffer, size_t offset, uint64_t length,
                        OpCallback done) const;
  void DispatchSlices(const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                      OpCallback done, PieceSubmit piece);
  void SubmitOne(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                 int rail, std::chrono::system_clock::time_point deadline, OpCallback done);
  // Now + rpc_timeout, or time_point::max() without one.
  std::chrono::system_clock::time_point DeadlineFromNow() const;
  // Sends one piece through the admission window (at once with fail_when_full): `send` gets
  // the piece's deadline and the callback to answer. `stream`: the Stream's share of the
  // window (its own limit), nullptr for unary calls.
  using PieceSend =
      std::function<void(std::chrono::system_clock::time_point deadline, OpCallback done)>;
  void Admit(void* stream, uint64_t bytes, std::chrono::system_clock::time_point deadline,
             PieceSend send, OpCallback done);
  // Blocks until no op of `stream` waits in the window or is in flight.
  void AwaitStreamIdle(void* stream);
  // Asks the daemon for its limits (async) and gives them to the window.
  void FetchLimits();
  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GdrStore::Stub> stub_;
  // tcp, rc or dc behind one interface; shared with the registrations that need it alive.
  std::shared_ptr<gdr::ClientTransport> transport_;
  std::unique_ptr<gdr::RegistrationCache> registrations_;
  std::string auto_notes_;
  // Runs op deadlines and the window's pauses; declared before what schedules on it.
  std::shared_ptr<gdr::DeadlineTimer> timer_;
  std::shared_ptr<gdr::AdmissionWindow> window_;  // null with fail_when_full
};

// The channel a Client talks to its daemon on: gRPC retries off (a retried op could run twice),
// TLS when options.tls_ca or tls_cert is set, and, when options.token is set, the bearer token
// attached to every call. For callers that build requests themselves on a channel of their
// own. INVALID_ARGUMENT / NOT_FOUND naming the option and file when a TLS file cannot be read
// or does not check out (PEM, key matching the certificate).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenDaemonChannel(const ClientOptions& options);

// grpc::Status -> absl::Status, same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace gdrstore
