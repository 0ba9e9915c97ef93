// libgdrclient's public value types: the options a Client is opened with, what an op is and
// returns, and what the transport in use reports. Shared by the façade (client.h) and the
// library's transports, which include this header and never the façade.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdrstore {

// How the daemon reaches this process's memory.
enum class Transport {
  kTcp,  // the library's software target (any host)
  kRc,   // reliable-connected RDMA QPs on a verbs device (RoCE, InfiniBand, SoftRoCE)
  kDc,   // an mlx5 DC target (DCT) the daemon's DC initiators reach; ConnectX-5 or later
  kLocal,  // a daemon on this host: memory handed over through its Unix socket, no copy
  kAuto, // local where the daemon shares this host, else dc where the daemon offers it and this
         // device can, else rc, else tcp
};

// "tcp", "rc", "dc", "local", "auto".
const char* TransportName(Transport t);
// The inverse of TransportName; nullopt for any other name.
std::optional<Transport> ParseTransport(const std::string& name);

// ClientOptions::gpu_staging_slot_bytes unless set.
inline constexpr size_t kGpuStagingSlotBytes = size_t{4} << 20;

struct ClientOptions {
  Transport transport = Transport::kTcp;
  // gdrstored's gRPC address, HOST:PORT.
  std::string daemon_address = "127.0.0.1:50051";
  // local: the daemon's handoff socket. Empty: the path the daemon's GetInfo names.
  std::string local_socket;
  // The node agent's socket (gdragent --socket): when set, every call goes through the agent,
  // which owns the RDMA devices and the daemon connections; daemon_address, transport and the
  // RDMA, TLS and token options are the agent's business and ignored here. Memory is handed
  // to the agent without copies (AllocateBuffer's memory, GPU memory); host memory the caller
  // owns is refused, naming AllocateBuffer.
  std::string agent;
  // What every op's path must be, instead of falling back (docs/python.md "Paths"): terms
  // joined by commas, e.g. "local", "rc,dma-buf", "agent". Connect fails when the transport
  // it reaches rules a term out (naming why: auto's notes), a GPU buffer's registration when
  // its way does (naming why: dma-buf's failure), an op when its path does (the node agent's
  // hops beyond are known from its answers only). Empty: any path.
  std::string require;
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
  // Pinned staging ring per daemon link for GPU buffers on the tcp transport. The daemon is
  // asked to cut GPU buffers' bytes into pieces of one slot (when 64 KiB..16 MiB): a 4 MiB
  // copy of a slot just received runs at 31 GB/s where 1 MiB ones run at 17, and 8 clients into
  // one GPU got 1.06x (1 x H200) to 1.27x (4 x H200) the GB/s of 1 MiB slots (docs/
  // benchmarks.md, issue 45). The cost: slots x slot bytes of pinned memory per link per GPU,
  // 16 links' worth made when memory on a GPU is first registered (256 MiB at 4 MiB).
  size_t gpu_staging_slot_bytes = kGpuStagingSlotBytes;
  int gpu_staging_slots = 4;
  // tcp: the largest unary Write whose bytes this process takes in the daemon's answer instead
  // of through its target (the daemon's --tcp-inline-max bounds it too); a small op then needs
  // no link round trip. Ops on an OpStream, and descriptors (Describe), never ask for them.
  // 0: every Write over a link.
  uint32_t tcp_inline_max = 64 << 10;
  // Stream RPCs an OpStream spreads its ops over (StreamOptions::calls when set), 1..64: one
  // call's ops go one message at a time each way, which bounded a lone Stream's small ops
  // (4 KiB at qd 32 on a 16-core host: 1.5x unary calls over one call, 3.3x over four). More
  // calls mean smaller messages, which cost CPU where it is short: 8 and 16 such clients on
  // the daemon's own 16 cores got about 0.75x and 0.62x the ops/s of one call each; 1 there.
  // docs/benchmarks.md, issue 45.
  uint32_t stream_calls = 4;
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
  // Daemon links connected to this target now: a busy lone client grows past its share up
  // to the daemon's --tcp-max-links-per-target, and the links past the share close a few
  // seconds after they go idle (what a like-for-like baseline has to match).
  uint32_t links = 0;
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

// The transport a Client runs on, for display: what it is, and what it has done.
// Fields of other transports keep their empty defaults.
struct TransportInfo {
  Transport kind = Transport::kTcp;  // tcp, rc, dc or local: never kAuto (resolved at Connect)
  // One line for people: "tcp target 10.0.0.5:40123", "rc on rxe0 port 1 (2 QPs)",
  // "dc: DCT 0x000123 on mlx5_0 port 1"; with rails, the rails' count and devices.
  std::string description;
  // tcp: where the target listens, and what it has done so far.
  std::string target_host;
  uint16_t target_port = 0;
  TargetStats target;
  // rc: the device and connection in use (with rails, the first rail's); dc: unset.
  std::optional<RdmaLocalInfo> rdma;
  // dc: the DCT number buffers are reached through. The access key is never exposed except
  // inside descriptors.
  uint32_t dct_number = 0;
  // Per rail (ClientOptions::rails); empty without rails. Notes on rails asked for and left
  // out ("rxe1: reaches no daemon rail ..."); empty if none.
  std::vector<RailStats> rails;
  std::string rail_notes;
  // kAuto: why a faster transport was not picked ("dc: ...; rc: ..."); empty otherwise.
  std::string auto_notes;
  // local: the handoff socket memory is handed over through, and whether that is a node
  // agent's (which then reaches the daemons its own way) rather than the daemon's.
  std::string local_socket;
  bool through_agent = false;
};

// StreamOptions::calls and ClientOptions::stream_calls at most.
inline constexpr uint32_t kMaxStreamCalls = 64;

// Client::OpenStream's choices for one OpStream.
struct StreamOptions {
  // Stream RPCs its ops are spread over, round robin, 1..64; 0: ClientOptions::stream_calls.
  uint32_t calls = 0;
  // At most this many ops in one request message, a group leaving as soon as it is complete
  // (whether smaller overlapping messages beat one per batch); 0: the wire's limit.
  uint32_t max_ops_per_message = 0;
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
  // The path the bytes took (docs/python.md "Paths"): the client's hop, then any beyond it,
  // joined by '>', e.g. "rc:mlx5_0/dma-buf", "tcp/staged", "agent/cuda-ipc>rc:mlx5_0/dma-buf".
  std::string path;
};

// Memory another process handed to this one, described as it was handed (the node agent's
// clients' memory): registered with it, transport local hands the daemon the same memory, the
// same way, instead of exporting it again (CUDA does not export imported memory; a memfd is
// passed, not copied). Other transports register the mapping as they would any memory.
struct HandedOver {
  enum class Kind { kHostMemfd, kGpuIpcHandle, kGpuVmmFd };
  Kind kind = Kind::kHostMemfd;
  int fd = -1;                 // kHostMemfd, kGpuVmmFd: the descriptor (the library dups it)
  uint64_t offset = 0;         // of the memory's first byte in the memfd / the GPU allocation
  uint64_t allocation_size = 0;            // GPU kinds: the whole allocation's bytes
  std::array<uint8_t, 64> ipc_handle{};    // kGpuIpcHandle
  std::string gpu;                         // GPU kinds: the GPU's PCI address
  // kGpuVmmFd of memory mapped from several VMM allocations side by side (PyTorch's expandable
  // segments): each one's descriptor (the library dups them) and bytes, in address order; `fd`
  // is then -1 and allocation_size their sum. Empty for a single allocation.
  struct VmmChunk {
    int fd = -1;
    uint64_t size = 0;
  };
  std::vector<VmmChunk> chunks;
};

enum class OpKind {
  kWrite,     // daemon writes store bytes into the buffer
  kRead,      // daemon reads the buffer into the store
  kReadSync,  // kRead answered only once the extent is msync'ed to a file-backed volume's file
              // (survives a host crash; OpResult::synced says it happened)
};

using OpCallback = std::function<void(absl::StatusOr<OpResult>)>;

}  // namespace gdrstore
