// gdrctl: the command-line client of gdrstored. info, write, read (with pattern verification),
// bench, topo (where NICs and GPUs sit on the PCIe tree), selftest, stats, fault (injected
// faults, through the Admin service), doctor (is this host set up for GPUDirect RDMA), replay
// and trace show (gdrstored --trace files). write/read/bench take --gpu to use device memory
// on a GPU named by PCI address or CUDA ordinal. Exit codes: 0 ok, 1 the op or RPC failed,
// 2 bad usage, 3 verification mismatch.
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/gdrctl/bench.h"
#include "client/gdrctl/bench_progress.h"
#include "client/gdrctl/client_rails.h"
#include "client/gdrctl/cluster_cmd.h"
#include "client/gdrctl/doctor/doctor.h"
#include "client/gdrctl/doctor/real_probes.h"
#include "client/gdrctl/fault_cmd.h"
#include "client/gdrctl/replay.h"
#include "client/gdrctl/trace_show.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_direct.h"
#include "common/base/host_port.h"
#include "common/cuda/gpu_select.h"
#include "common/topo/pci_topology.h"
#include "client/gdrctl/stats.h"
#include "common/base/pattern.h"
#include "common/wire/token_file.h"
#include "common/wire/transport_kind.h"
#include "common/base/units.h"
#include "common/base/status_macros.h"
#include "client/gdrctl/selftest.h"
#include "client/gdrctl/size_flag.h"
#include "gdrstore/client.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitMismatch = 3;

struct Common {
  std::string address = "127.0.0.1";
  uint16_t port = 50051;
  std::string daemon;  // HOST:PORT, wins over -a/-p
  std::string target_host;
  int64_t timeout_ms = 120000;
  bool json = false;
  std::string transport = "tcp";
  std::string rdma_device;
  std::string rdma_addr;
  int gid_index = -1;
  uint32_t rc_qps = 2;
  std::string rails;  // --rails: comma list of devices, or auto; empty: one device
  uint64_t slice_bytes = 1 << 20;
  std::string token_file;  // --token-file, else $GDRSTORE_TOKEN_FILE
  // --tls-ca/--tls-cert/--tls-key/--tls-server-name, else $GDRSTORE_TLS_CA etc.
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool crc32c = false;  // --crc
};

struct OpArgs {
  std::string volume = "vol0";
  uint64_t offset = 0;
  uint64_t size = 4096;
  uint64_t buffer_offset = 0;
  bool verify = false;
  uint64_t salt = 0;
  std::string gpu;  // empty: host memory
  bool sync = false;  // read: answered only after msync to a file-backed volume
};

// Host memory, or device memory on args.gpu. Errors name the GPU and what is missing.
absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> Allocate(gdrstore::Client& client,
                                                           const std::string& gpu, size_t bytes) {
  if (gpu.empty()) return client.AllocateBuffer(bytes);
  return client.AllocateGpuBuffer(gpu, bytes);
}

// [offset, offset+n) of `buffer` as host bytes (a copy back from the GPU for device memory).
absl::StatusOr<std::vector<std::byte>> ReadBack(const gdrstore::Buffer& buffer, size_t offset,
                                                size_t n) {
  std::vector<std::byte> out(n);
  GDR_RETURN_IF_ERROR(buffer.CopyOut(offset, out.data(), n));
  return out;
}

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "gdrctl: %s\n", what.c_str());
  return code;
}

int Fail(const absl::Status& s, const std::string& context) {
  return Fail(kExitFailed, absl::StrCat(context, ": ", absl::StatusCodeToString(s.code()), ": ",
                                        s.message()));
}

// The daemon's HOST:PORT from --daemon, or from -a (HOST, HOST:PORT, V6, [V6] or [V6]:PORT)
// and -p. A port in -a that disagrees with an explicit -p is refused rather than guessed at.
absl::StatusOr<std::string> DaemonAddress(const Common& c, bool port_given) {
  if (!c.daemon.empty()) {
    if (absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(c.daemon); !hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--daemon: ", hp.status().message()));
    }
    return c.daemon;
  }
  const std::string& a = c.address;
  const size_t colons = std::count(a.begin(), a.end(), ':');
  if (a.empty()) return absl::InvalidArgumentError("-a: empty daemon host");
  if (a.front() == '[' && a.back() == ']') {
    return gdr::JoinHostPort(a.substr(1, a.size() - 2), c.port);
  }
  if (a.front() != '[' && colons != 1) return gdr::JoinHostPort(a, c.port);  // a host or a bare V6
  absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(a);
  if (!hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-a: ", hp.status().message(), "; -a takes HOST, HOST:PORT or [V6]:PORT (or use -p)"));
  }
  if (port_given && hp->port != c.port) {
    return absl::InvalidArgumentError(absl::StrCat("-a ", a, " names port ", hp->port,
                                                   " but -p says ", c.port, ": give the port once"));
  }
  return gdr::JoinHostPort(hp->host, hp->port);
}

absl::StatusOr<gdrstore::ClientOptions> ClientOptionsOf(const Common& c) {
  gdrstore::ClientOptions o;
  std::string token_file = c.token_file;
  if (token_file.empty()) {
    if (const char* env = std::getenv("GDRSTORE_TOKEN_FILE")) token_file = env;
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = gdr::ReadClientToken(token_file);
    if (!token.ok()) return token.status();
    o.token = *std::move(token);
  }
  auto flag_or_env = [](const std::string& flag, const char* env) {
    const char* v = std::getenv(env);
    return !flag.empty() || v == nullptr ? flag : std::string(v);
  };
  o.tls_ca = flag_or_env(c.tls_ca, "GDRSTORE_TLS_CA");
  o.tls_cert = flag_or_env(c.tls_cert, "GDRSTORE_TLS_CERT");
  o.tls_key = flag_or_env(c.tls_key, "GDRSTORE_TLS_KEY");
  o.tls_server_name = flag_or_env(c.tls_server_name, "GDRSTORE_TLS_SERVER_NAME");
  o.daemon_address = c.daemon;  // resolved by DaemonAddress after parsing
  o.target_host = c.target_host;
  o.rpc_timeout = std::chrono::milliseconds(c.timeout_ms);
  std::optional<gdrstore::Transport> transport = gdrstore::ParseTransport(c.transport);
  if (!transport) {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport '", c.transport, "' is not one of tcp, rc, dc, auto"));
  }
  o.transport = *transport;
  o.rdma_device = c.rdma_device;
  o.rdma_address = c.rdma_addr;
  o.rdma_gid_index = c.gid_index;
  o.rc_qps = c.rc_qps;
  if (!c.rails.empty()) {
    o.rails = absl::StrSplit(c.rails, ',', absl::SkipWhitespace());
    if (o.rails.empty()) return absl::InvalidArgumentError("--rails: no device named");
  }
  o.slice_bytes = c.slice_bytes;
  o.crc32c = c.crc32c;
  return o;
}

absl::StatusOr<std::unique_ptr<gdrstore::Client>> Connect(const Common& c) {
  absl::StatusOr<gdrstore::ClientOptions> o = ClientOptionsOf(c);
  if (!o.ok()) return o.status();
  return gdrstore::Client::Connect(*o);
}

int CmdInfo(const Common& c) {
  auto client = Connect(c);
  if (!client.ok()) return Fail(client.status(), "connect");
  auto info = (*client)->GetInfo(std::chrono::milliseconds(c.timeout_ms));
  if (!info.ok()) return Fail(info.status(), "GetInfo");
  if (c.json) {
    std::string out = absl::StrCat("{\"version\":\"", info->version(), "\",\"transports\":[");
    for (int i = 0; i < info->transports_size(); ++i) {
      const auto& t = info->transports(i);
      absl::StrAppend(&out, i ? "," : "", "{\"name\":\"", gdr::TransportName(t.transport()),
                      "\",\"available\":", t.available() ? "true" : "false", "}");
    }
    absl::StrAppend(&out, "],\"volumes\":[");
    for (int i = 0; i < info->volumes_size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", "{\"name\":\"", info->volumes(i).name(),
                      "\",\"size\":", info->volumes(i).size(), "}");
    }
    const auto& l = info->limits();
    absl::StrAppend(&out, "],\"limits\":{\"max_op_bytes\":", l.max_op_bytes(),
                    ",\"max_inflight_per_stream\":", l.max_inflight_per_stream(),
                    ",\"max_inflight_ops\":", l.max_inflight_ops(),
                    ",\"max_inflight_bytes\":", l.max_inflight_bytes(),
                    ",\"chunk_bytes\":", l.chunk_bytes(), ",\"max_links\":", l.max_links(), "}");
    if (info->has_tls()) {
      const auto& t = info->tls();
      absl::StrAppend(&out, ",\"tls\":{\"enabled\":", t.enabled() ? "true" : "false",
                      ",\"client_certificate_required\":",
                      t.client_certificate_required() ? "true" : "false",
                      ",\"reloads\":", t.reloads(), ",\"refused\":", t.refused(), "}");
    }
    if (info->has_rdma()) {
      const auto& r = info->rdma();
      absl::StrAppend(&out, ",\"rdma\":{\"device\":\"", r.device(), "\",\"port\":", r.port(),
                      ",\"port_state\":\"", r.port_state(), "\",\"gid_index\":", r.gid_index(),
                      ",\"gid\":\"", r.gid_address(), "\",\"mtu\":", r.mtu(),
                      ",\"rc_qps\":", r.rc_qps(), ",\"rc_max_qps\":", r.rc_max_qps(),
                      ",\"rc_connections\":", r.rc_connections(), "}");
    }
    if (info->rails_size() > 0) {
      absl::StrAppend(&out, ",\"rails\":[");
      for (int i = 0; i < info->rails_size(); ++i) {
        const auto& r = info->rails(i);
        absl::StrAppend(&out, i ? "," : "", "{\"index\":", r.index(), ",\"device\":\"",
                        r.device(), "\",\"port\":", r.port(), ",\"port_state\":\"",
                        r.port_state(), "\",\"serving\":", r.serving() ? "true" : "false",
                        ",\"link_layer\":\"", r.link_layer(), "\",\"gid\":\"", r.gid_address(),
                        "\",\"speed_mbps\":", r.speed_mbps(), ",\"numa_node\":", r.numa_node(),
                        ",\"pci\":\"", r.pci(), "\"}");
      }
      absl::StrAppend(&out, "]");
    }
    if (auto mine = (*client)->transport_info().rdma) {
      absl::StrAppend(&out, ",\"client_rdma\":{\"device\":\"", mine->device, "\",\"port\":",
                      mine->port, ",\"port_state\":\"", mine->port_state,
                      "\",\"gid_index\":", mine->gid_index, ",\"gid\":\"", mine->gid,
                      "\",\"mtu\":", mine->mtu, ",\"qps\":", mine->qps,
                      ",\"connection_id\":", mine->connection_id, "}");
    }
    if (const std::string rails = gdrctl::ClientRailsJson(**client); !rails.empty()) {
      absl::StrAppend(&out, ",", rails);
    }
    absl::StrAppend(&out, "}");
    std::cout << out << "\n";
    return kExitOk;
  }
  std::cout << "gdrstored " << info->version() << "\n";
  std::cout << "transports:\n";
  for (const auto& t : info->transports()) {
    std::cout << absl::StrFormat("  %-4s %-13s %s\n", gdr::TransportName(t.transport()),
                                 t.available() ? "available" : "unavailable", t.detail());
  }
  std::cout << "volumes:\n";
  for (const auto& v : info->volumes()) {
    std::cout << absl::StrFormat("  %-16s %14u bytes (%s, %s)\n", v.name(), v.size(),
                                 gdr::FormatSize(v.size()), v.backing());
  }
  const auto& l = info->limits();
  std::cout << "limits:\n"
            << "  max op size         " << gdr::FormatSize(l.max_op_bytes()) << "\n"
            << "  chunk size          " << gdr::FormatSize(l.chunk_bytes()) << "\n"
            << "  in flight / stream  " << l.max_inflight_per_stream() << " ops\n"
            << "  in flight / daemon  " << l.max_inflight_ops() << " ops, "
            << gdr::FormatSize(l.max_inflight_bytes()) << "\n"
            << "  tcp links           " << l.max_links() << "\n";
  if (info->tls().enabled()) {
    const auto& t = info->tls();
    std::cout << "tls:\n"
              << "  mode                "
              << (t.client_certificate_required() ? "mTLS (client certificates required)" : "TLS")
              << "\n  certificate         " << t.certificate_subject() << ", valid until "
              << t.certificate_not_after() << "\n  reloads             " << t.reloads()
              << " taken, " << t.refused() << " refused\n";
  }
  if (info->has_rdma()) {
    const auto& r = info->rdma();
    std::cout << "rdma (daemon):\n"
              << absl::StrFormat("  device              %s port %u, %s, %s\n", r.device(), r.port(),
                                 r.port_state(), r.link_layer())
              << absl::StrFormat("  GID index           %u: %s (%s)\n", r.gid_index(),
                                 r.gid_address(), r.gid_type())
              << absl::StrFormat("  MTU                 %u, max message %s\n", r.mtu(),
                                 gdr::FormatSize(r.max_msg_bytes()))
              << absl::StrFormat("  rc QPs              %u in use of %u (%u per client), %u "
                                 "connections, poller %s\n",
                                 r.rc_qps(), r.rc_max_qps(), r.rc_max_qps_per_client(),
                                 r.rc_connections(), r.poll_mode());
    if (!r.relaxed_ordering().empty()) {
      std::cout << "  relaxed ordering    " << r.relaxed_ordering() << "\n";
    }
  }
  if (info->rails_size() > 0) {
    // One line per rail: a rail that is not serving takes no new work until its port is ACTIVE.
    std::cout << "rails (daemon):\n"
              << absl::StrFormat("  %-3s %-12s %-4s %-8s %-7s %-10s %-24s %-10s %-4s %s\n", "#",
                                 "device", "port", "state", "serving", "link", "GID address",
                                 "speed", "NUMA", "PCI");
    for (const auto& r : info->rails()) {
      const std::string speed =
          r.speed_mbps() == 0 ? "-"
          : r.speed_mbps() % 1000 == 0
              ? absl::StrCat(r.speed_mbps() / 1000, " Gb/s")
              : absl::StrFormat("%.1f Gb/s", static_cast<double>(r.speed_mbps()) / 1000);
      std::cout << absl::StrFormat(
          "  %-3u %-12s %-4u %-8s %-7s %-10s %-24s %-10s %-4s %s\n", r.index(), r.device(),
          r.port(), r.port_state(), r.serving() ? "yes" : "no", r.link_layer(),
          r.gid_address().empty() ? "-" : r.gid_address(), speed,
          r.numa_node() >= 0 ? absl::StrCat(r.numa_node()) : "-",
          r.pci().empty() ? "-" : r.pci());
    }
  }
  if (auto mine = (*client)->transport_info().rdma) {
    std::cout << "rdma (this client):\n"
              << absl::StrFormat("  device              %s port %u, %s\n", mine->device,
                                 mine->port, mine->port_state)
              << absl::StrFormat("  GID index           %d: %s\n", mine->gid_index, mine->gid)
              << absl::StrFormat("  MTU                 %u\n", mine->mtu)
              << absl::StrFormat("  rc connection       %u: %u QPs to %s\n", mine->connection_id,
                                 mine->qps, mine->daemon_device);
    std::cout << gdrctl::ClientRailsText(**client);
  } else {
    std::cout << "client tcp target:  " << (*client)->transport_info().target_host << ":"
              << (*client)->transport_info().target_port << "\n";
  }
  return kExitOk;
}

std::string MismatchText(const std::byte* data, uint64_t seed, uint64_t offset, size_t at) {
  return absl::StrFormat("verify failed at volume offset %u: got 0x%02x, want 0x%02x",
                         offset + at, static_cast<unsigned>(data[at]),
                         static_cast<unsigned>(gdr::PatternByte(seed, offset + at)));
}

// write: store -> buffer. --verify checks the buffer against the volume's pattern (valid while
// the extent holds the initial fill, or what a `read --salt N` put there: pass the same salt).
int CmdWrite(const Common& c, const OpArgs& a) {
  const uint64_t size = a.size;
  auto client = Connect(c);
  if (!client.ok()) return Fail(client.status(), "connect");
  auto buffer = Allocate(**client, a.gpu, size + a.buffer_offset);
  if (!buffer.ok()) return Fail(buffer.status(), a.gpu.empty() ? "allocate" : "allocate --gpu");
  gdrstore::Extent extent{a.volume, a.offset, size};
  auto r = (*client)->Write(extent, **buffer, a.buffer_offset);
  if (!r.ok()) return Fail(r.status(), "write");
  std::string verdict;
  if (a.verify) {
    const uint64_t seed = gdr::PatternSeed(a.volume, a.salt);
    // GPU memory is copied back from the device: what is checked is what landed there.
    auto got = ReadBack(**buffer, a.buffer_offset, size);
    if (!got.ok()) return Fail(got.status(), "verify (copy back)");
    if (auto bad = gdr::PatternMismatch(seed, a.offset, *got)) {
      return Fail(kExitMismatch, MismatchText(got->data(), seed, a.offset, *bad));
    }
    verdict = (*buffer)->on_gpu() ? ", verified in GPU memory" : ", verified";
  }
  const std::string where =
      (*buffer)->on_gpu()
          ? absl::StrCat("GPU ", (*buffer)->gpu_ordinal(), " (", (*buffer)->gpu_pci(), ")")
          : "buffer";
  if (c.json) {
    std::cout << absl::StrFormat(
        "{\"op\":\"write\",\"volume\":\"%s\",\"offset\":%u,\"bytes\":%u,\"service_us\":%.1f,"
        "\"verified\":%s,\"gpu\":\"%s\"}\n",
        a.volume, a.offset, r->bytes, r->service_ns / 1e3, a.verify ? "true" : "false",
        (*buffer)->gpu_pci());
  } else {
    std::cout << absl::StrFormat("write %s@%u +%u -> %s: ok, %u bytes in %.1f us%s\n",
                                 a.volume, a.offset, size, where, r->bytes, r->service_ns / 1e3,
                                 verdict);
  }
  return kExitOk;
}

// read: buffer -> store. The buffer holds the pattern of (volume, salt). --verify proves the
// bytes reached the store: it first stores a different (random-salted) pattern and reads it
// back with a Write, then stores the requested pattern and reads that back too.
int CmdRead(const Common& c, const OpArgs& a) {
  const uint64_t size = a.size;
  auto client = Connect(c);
  if (!client.ok()) return Fail(client.status(), "connect");
  auto src = Allocate(**client, a.gpu, size + a.buffer_offset);
  if (!src.ok()) return Fail(src.status(), a.gpu.empty() ? "allocate" : "allocate --gpu");
  gdrstore::Extent extent{a.volume, a.offset, size};
  std::vector<std::byte> payload(size);  // the pattern, put into the buffer with CopyIn

  std::vector<uint64_t> salts;
  if (a.verify) {
    std::random_device rd;
    uint64_t probe = 0;
    while (probe == 0 || probe == a.salt) probe = (uint64_t{rd()} << 32) | rd();
    salts.push_back(probe);
  }
  salts.push_back(a.salt);
  absl::StatusOr<gdrstore::OpResult> r;
  std::unique_ptr<gdrstore::Buffer> check;
  for (uint64_t salt : salts) {
    const uint64_t seed = gdr::PatternSeed(a.volume, salt);
    gdr::PatternFill(seed, a.offset, payload);
    if (absl::Status st = (*src)->CopyIn(a.buffer_offset, payload.data(), size); !st.ok()) {
      return Fail(st, "fill buffer");
    }
    r = (*client)->Read(extent, **src, a.buffer_offset, a.sync);
    if (!r.ok()) return Fail(r.status(), "read");
    if (!a.verify) break;
    if (!check) {
      auto b = Allocate(**client, a.gpu, size);
      if (!b.ok()) return Fail(b.status(), "allocate");
      check = std::move(*b);
    }
    std::vector<std::byte> zeros(size);
    if (absl::Status st = check->CopyIn(0, zeros.data(), size); !st.ok()) {
      return Fail(st, "clear verify buffer");
    }
    auto back = (*client)->Write(extent, *check);
    if (!back.ok()) return Fail(back.status(), "verify (write back)");
    auto got = ReadBack(*check, 0, size);
    if (!got.ok()) return Fail(got.status(), "verify (copy back)");
    if (auto bad = gdr::PatternMismatch(seed, a.offset, *got)) {
      return Fail(kExitMismatch, MismatchText(got->data(), seed, a.offset, *bad));
    }
  }
  if (c.json) {
    std::cout << absl::StrFormat(
        "{\"op\":\"read\",\"volume\":\"%s\",\"offset\":%u,\"bytes\":%u,\"service_us\":%.1f,"
        "\"synced\":%s,\"verified\":%s}\n",
        a.volume, a.offset, r->bytes, r->service_ns / 1e3, r->synced ? "true" : "false",
        a.verify ? "true" : "false");
  } else {
    const std::string where =
        (*src)->on_gpu()
            ? absl::StrCat("GPU ", (*src)->gpu_ordinal(), " (", (*src)->gpu_pci(), ")")
            : "buffer";
    std::cout << absl::StrFormat("read %s -> %s@%u +%u: ok, %u bytes in %.1f us%s%s\n", where,
                                 a.volume, a.offset, size, r->bytes, r->service_ns / 1e3,
                                 r->synced ? ", msync'ed to the volume's file" : "",
                                 a.verify ? ", verified" : "");
  }
  return kExitOk;
}

// `span`: nullopt cycles through up to 256 MiB of the volume. `progress`: show the live line.
int CmdBench(const Common& c, gdrctl::BenchOptions o, const std::string& type,
             std::optional<uint64_t> span, bool progress, const std::string& gpu) {
  if (type == "write" || type == "0") {
    o.kind = gdrstore::OpKind::kWrite;
  } else if (type == "read" || type == "1") {
    o.kind = gdrstore::OpKind::kRead;
  } else {
    return Fail(kExitUsage, absl::StrCat("-t must be write|read|0|1, not '", type, "'"));
  }
  auto client = Connect(c);
  if (!client.ok()) return Fail(client.status(), "connect");
  if (!span) {
    // Default: cycle through up to 256 MiB of the volume, within its size.
    auto info = (*client)->GetInfo(std::chrono::milliseconds(c.timeout_ms));
    if (!info.ok()) return Fail(info.status(), "GetInfo");
    uint64_t vol_size = 0;
    for (const auto& v : info->volumes())
      if (v.name() == o.volume) vol_size = v.size();
    if (vol_size == 0) {
      return Fail(kExitFailed, absl::StrCat("no volume '", o.volume,
                                            "' on the daemon (or none this token may use)"));
    }
    o.span = vol_size > o.offset ? std::min<uint64_t>(vol_size - o.offset, 256ull << 20) : 0;
  } else {
    o.span = *span;
  }
  gdrctl::BenchProgress meter(o.iterations, o.size);
  if (progress) {
    // One line, rewritten in place about once a second; cleared when the loop ends.
    o.progress = [&meter](uint64_t done, double secs) {
      std::fprintf(stderr, "\r%s\x1b[K", meter.Update(done, secs).c_str());
    };
  }
  std::unique_ptr<gdrstore::Buffer> gpu_buffer;
  if (!gpu.empty()) {
    const uint64_t slots = std::max<uint64_t>(1, std::min<uint64_t>(o.qd, o.iterations));
    auto b = (*client)->AllocateGpuBuffer(gpu, slots * o.size);
    if (!b.ok()) return Fail(b.status(), "allocate --gpu");
    gpu_buffer = std::move(*b);
    o.buffer = gpu_buffer.get();
  }
  o.transport = gdrstore::TransportName((*client)->transport_info().kind);
  auto r = gdrctl::RunBench(**client, o);
  if (o.progress) std::fprintf(stderr, "\r\x1b[K");
  if (!r.ok()) return Fail(r.status(), "bench");
  if (c.json) {
    std::string json = gdrctl::BenchResultJson(o, *r);
    if (const std::string rails = gdrctl::ClientRailsJson(**client); !rails.empty()) {
      json.insert(json.size() - 1, "," + rails);  // inside the object's closing brace
    }
    std::cout << json << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%s %s x %u, qd %u over %s: %.3f GB/s, %.0f ops/s, latency us p50 %.1f p99 %.1f max "
        "%.1f\n",
        o.kind == gdrstore::OpKind::kWrite ? "write" : "read", gdr::FormatSize(o.size),
        o.iterations, o.qd, o.unary ? "unary" : "stream", r->gbps, r->ops_per_sec, r->p50_us,
        r->p99_us, r->max_us);
    std::cout << gdrctl::ClientRailsText(**client);
  }
  return kExitOk;
}

// topo --rails: a comma list of RDMA devices of the tree, or empty / auto for every one of them.
absl::StatusOr<std::vector<std::string>> TopoRails(const gdr::topo::Topology& topo,
                                                   const std::string& list,
                                                   const std::string& sysfs_root) {
  const std::vector<std::string> all = gdr::topo::AllNicNames(topo);
  if (list.empty() || list == "auto") return all;
  std::vector<std::string> rails;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    rails.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (rails.empty()) return absl::InvalidArgumentError("--rails: no device named");
  for (size_t i = 0; i < rails.size(); ++i) {
    if (std::find(all.begin(), all.end(), rails[i]) == all.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rails: no RDMA device '", rails[i], "' in ", sysfs_root, "/class/infiniband (there: ",
          all.empty() ? "none" : absl::StrJoin(all, ", "), ")"));
    }
    if (std::find(rails.begin(), rails.begin() + i, rails[i]) != rails.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("--rails: '", rails[i], "' named twice"));
    }
  }
  return rails;
}

// topo: NICs and GPUs on the PCIe tree, their relation, and the rail a client with `rails_list`
// uses for each GPU (with a warning where that rail is across sockets).
int CmdTopo(const Common& c, const std::string& sysfs_root, const std::string& rails_list) {
  auto topo = gdr::topo::ReadTopology(sysfs_root);
  if (!topo.ok()) return Fail(topo.status(), "topo");
  absl::StatusOr<std::vector<std::string>> rails = TopoRails(*topo, rails_list, sysfs_root);
  if (!rails.ok()) return Fail(kExitUsage, std::string(rails.status().message()));
  if (c.json) {
    std::cout << gdr::topo::TopologyJson(*topo, *rails) << "\n";
    return kExitOk;
  }
  std::cout << gdr::topo::FormatTopology(*topo, *rails);
  if (sysfs_root == "/sys") {
    // CUDA's view, so ordinals can be matched with PCI addresses.
    auto gpus = gdr::cuda::ListGpus();
    if (gpus.ok()) {
      std::cout << "CUDA devices:\n";
      for (const auto& g : *gpus) {
        std::cout << absl::StrFormat("  %d  %s  %s, %s, dma-buf %s\n", g.ordinal, g.pci, g.name,
                                     gdr::FormatSize(g.total_bytes),
                                     g.dma_buf ? "supported" : "not supported");
        absl::StatusOr<gdr::cuda::GpuDirectAttributes> gd =
            gdr::cuda::ReadGpuDirectAttributes(g.ordinal);
        std::cout << "     " << (gd.ok() ? gdr::cuda::DescribeGpuDirect(*gd)
                                         : std::string(gd.status().message()))
                  << "\n";
      }
    } else {
      std::cout << "CUDA devices: " << gpus.status().message() << "\n";
    }
  }
  return kExitOk;
}

void AddOpArgs(CLI::App* cmd, OpArgs* a) {
  cmd->add_option("--volume", a->volume, "volume name")->capture_default_str();
  gdrctl::AddSizeOption(cmd, "-o,--offset", &a->offset, "byte offset in the volume (e.g. 1MiB)");
  gdrctl::AddSizeOption(cmd, "-s,--size", &a->size, "bytes to move (e.g. 4096, 64KiB, 1MiB)");
  gdrctl::AddSizeOption(cmd, "--buffer-offset", &a->buffer_offset,
                        "start this many bytes into the registered buffer (unaligned tests)");
  cmd->add_option("--salt", a->salt, "pattern variant: 0 is the volume's initial fill");
  cmd->add_flag("--verify", a->verify, "check the moved bytes against the pattern");
  cmd->add_option("--gpu", a->gpu,
                  "use device memory on this GPU: PCI address (0000:b7:00.0 or b7:00.0) or CUDA "
                  "ordinal");
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles; keep that for tests.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"gdrctl: client of gdrstored (one-sided transfers between a store and your memory)"};
  app.require_subcommand(1);
  Common c;
  app.add_option("-a,--address", c.address, "daemon host: HOST, HOST:PORT or [V6]:PORT")
      ->capture_default_str();
  app.add_option("-p,--port", c.port, "daemon gRPC port")->capture_default_str();
  app.add_option("--daemon", c.daemon, "daemon HOST:PORT (overrides -a/-p)");
  app.add_option("--target-host", c.target_host,
                 "address the daemon uses to reach this client's tcp target (default: automatic)");
  app.add_option("--timeout-ms", c.timeout_ms, "deadline of each RPC")->capture_default_str();
  app.add_flag("--json", c.json, "machine-readable output");
  app.add_option("--transport", c.transport,
                 "how the daemon reaches this process's memory: tcp, rc, dc (mlx5 DCT) or auto "
                 "(dc, else rc, else tcp)")
      ->capture_default_str()->check(CLI::IsMember({"tcp", "rc", "dc", "auto"}));
  app.add_option("--rdma-device", c.rdma_device, "rc: RDMA device by name (default: first ACTIVE)");
  app.add_option("--rdma-addr", c.rdma_addr, "rc: RDMA device by local IP address");
  app.add_option("--rdma-gid-index", c.gid_index, "rc: GID index (-1: RoCE v2 IPv4-mapped)")
      ->capture_default_str();
  app.add_option("--rc-qps", c.rc_qps, "rc: QPs to connect")->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--rails", c.rails,
                 "rc over several RDMA devices: a comma list (rxe0,rxe1) or auto (every ACTIVE "
                 "one); large ops are striped over them");
  app.add_flag("--crc", c.crc32c,
               "ask the daemon for the CRC32C of every op's bytes and check it against the "
               "buffer (a mismatch fails the op: DATA_LOSS)");
  gdrctl::AddSizeOption(&app, "--slice-size", &c.slice_bytes,
                        "with --rails: ops this large are cut into slices of this size, spread "
                        "over the rails (default 1MiB)");
  app.add_option("--token-file", c.token_file,
                 "send the first token of this file as 'authorization: Bearer' (daemons with "
                 "--token-file; grants after the token are the daemon's business and ignored "
                 "here); default $GDRSTORE_TOKEN_FILE");
  app.add_option("--tls-ca", c.tls_ca,
                 "TLS to the daemon, trusting the CA(s) of this PEM file (daemons with "
                 "--tls-cert); default $GDRSTORE_TLS_CA");
  app.add_option("--tls-cert", c.tls_cert,
                 "client certificate (PEM) for daemons with --tls-client-ca; default "
                 "$GDRSTORE_TLS_CERT");
  app.add_option("--tls-key", c.tls_key, "private key of --tls-cert; default $GDRSTORE_TLS_KEY");
  app.add_option("--tls-server-name", c.tls_server_name,
                 "name to check the daemon's certificate against instead of the -a host; "
                 "default $GDRSTORE_TLS_SERVER_NAME");
  std::string cluster_url, cluster_file;
  app.add_option("--cluster", cluster_url,
                 "write/read/bench on a cluster volume of the cluster kept in etcd: "
                 "etcd://HOST:PORT[,HOST:PORT]/PREFIX (each member reached with the transport "
                 "and security flags given here)");
  app.add_option("--cluster-file", cluster_file,
                 "the same with a static members file (JSON: members and volumes)");
  app.set_version_flag("--version", GDR_VERSION);

  CLI::App* info = app.add_subcommand("info", "daemon version, transports, volumes, limits");
  OpArgs wa, ra;
  CLI::App* write = app.add_subcommand("write", "daemon writes store bytes into a buffer here");
  AddOpArgs(write, &wa);
  CLI::App* read = app.add_subcommand("read", "daemon reads a buffer here into the store");
  AddOpArgs(read, &ra);
  read->add_flag("--sync", ra.sync,
                 "file-backed volume: answered only once the bytes are msync'ed to its file");

  gdrctl::BenchOptions bo;
  std::string btype = "write";
  uint64_t bspan = 0;
  bool quiet = false;
  CLI::App* bench = app.add_subcommand("bench", "loop of ops: GB/s and latency percentiles");
  bench->add_option("-n,--iterations", bo.iterations, "ops to run")->capture_default_str();
  gdrctl::AddSizeOption(bench, "-s,--size", &bo.size, "bytes per op (e.g. 4KiB, 16MiB)");
  bench->add_option("-t,--type", btype, "write|read (or 0|1)")->capture_default_str();
  bench->add_option("--qd", bo.qd, "ops in flight")->capture_default_str();
  bench->add_flag("--unary", bo.unary, "one unary RPC per op instead of the Stream RPC");
  bench->add_option("--volume", bo.volume, "volume name")->capture_default_str();
  gdrctl::AddSizeOption(bench, "-o,--offset", &bo.offset, "first offset (e.g. 512MiB)");
  CLI::Option* bspan_opt = gdrctl::AddSizeOption(
      bench, "--span", &bspan, "cycle extents through this many bytes (default: up to 256MiB)");
  bspan_opt->default_str("");
  bench->add_flag("-q,--quiet", quiet,
                  "no live progress line (there is none either with --json or when stderr is "
                  "not a terminal)");
  // Also after the subcommand (`gdrctl bench --json`), where people put it.
  bench->add_flag("--json", c.json, "machine-readable output");
  std::string bgpu;
  bench->add_option("--gpu", bgpu, "use device memory on this GPU (PCI address or CUDA ordinal)");

  CLI::App* cluster = app.add_subcommand(
      "cluster", "the cluster of --cluster / --cluster-file: its members and volumes");
  cluster->require_subcommand(1);
  CLI::App* cluster_status = cluster->add_subcommand(
      "status", "members (address, lease left, version, volumes, health) and volume layouts; "
                "exit 1 when a member is absent or does not answer");
  cluster_status->add_flag("--json", c.json, "machine-readable output");
  std::string cv_name, cv_members;
  uint64_t cv_unit = 4 << 20;
  uint32_t cv_replicas = 1;
  CLI::App* create_volume = cluster->add_subcommand(
      "create-volume", "lay out cluster volume NAME over members serving a volume of that name");
  create_volume->add_option("name", cv_name, "volume name (each member serves one so named)")
      ->required();
  gdrctl::AddSizeOption(create_volume, "--stripe-unit", &cv_unit,
                        "bytes of each stripe unit (a power of two, 4KiB..1GiB; default 4MiB)");
  create_volume->add_option("--replicas", cv_replicas, "copies of each stripe")
      ->capture_default_str()->check(CLI::Range(1u, 1024u));
  create_volume->add_option("--members", cv_members,
                            "comma list of member ids, in placement order (default: every "
                            "member registered now)");
  create_volume->add_flag("--json", c.json, "machine-readable output");

  std::string sysfs_root = "/sys";
  CLI::App* topo = app.add_subcommand(
      "topo", "RDMA devices and GPUs on the PCIe tree, and the rail each GPU uses");
  topo->add_option("--sysfs-root", sysfs_root, "sysfs to read (a copy or fake tree for tests)")
      ->capture_default_str();
  std::string topo_rails;
  topo->add_option("--rails", topo_rails,
                   "the client's rails, a comma list of RDMA devices (default or auto: every one "
                   "in the tree; port state is not checked): the rail each GPU uses");
  // Also after the subcommand (`gdrctl topo --json`), where people put it.
  topo->add_flag("--json", c.json, "machine-readable output");

  gdrctl::SelftestOptions st;
  std::string st_sizes;
  CLI::App* selftest = app.add_subcommand(
      "selftest",
      "end-to-end check of --transport against the daemon: verified Writes/Reads of several "
      "sizes, a wrong rkey on purpose and the recovery; PASS/FAIL per step");
  selftest->add_option("--volume", st.volume, "volume to use")->capture_default_str();
  gdrctl::AddSizeOption(selftest, "-o,--offset", &st.offset,
                        "first byte of the volume the steps use (e.g. 1MiB)");
  selftest->add_option("--sizes", st_sizes, "comma-separated op sizes (default 1,4095,64KiB,1MiB+7,16MiB)");

  gdrctl::StatsOptions so;
  double stats_interval_s = 1.0;
  CLI::App* stats = app.add_subcommand("stats", "daemon counters: ops, bytes, errors, latency, pools");
  stats->add_flag("-w,--watch", so.watch, "refresh every --interval seconds, with rates");
  stats->add_option("--interval", stats_interval_s, "seconds between --watch samples")
      ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  stats->add_option("--count", so.count, "stop --watch after this many samples (0: never)");

  CLI::App* fault = app.add_subcommand(
      "fault", "injected faults of the daemon (its Admin service; an admin=yes token when it "
               "has a token file)");
  fault->require_subcommand(1);
  std::string fault_spec;
  CLI::App* fault_set = fault->add_subcommand(
      "set", "add a rule: kind=error|stall|corrupt|drop-link|qp-error|rail-down and its fields "
             "(docs/simulation.md)");
  fault_set->add_option("spec", fault_spec, "e.g. kind=error,volume=vol0,rate=0.1,code=UNAVAILABLE")
      ->required();
  fault_set->add_flag("--json", c.json, "machine-readable output");
  std::vector<uint64_t> fault_ids;
  bool fault_all = false;
  CLI::App* fault_clear = fault->add_subcommand("clear", "remove rules by id, or --all");
  fault_clear->add_option("ids", fault_ids, "rule ids (gdrctl fault list)");
  fault_clear->add_flag("--all", fault_all, "remove every rule");
  fault_clear->add_flag("--json", c.json, "machine-readable output");
  CLI::App* fault_list = fault->add_subcommand("list", "rules, their counts and windows");
  fault_list->add_flag("--json", c.json, "machine-readable output");

  gdrctl::doctor::DoctorOptions doc;
  std::string doc_role = "client";
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "is this host ready: RDMA ports, GIDs, MTU, DC, memlock, GPU registration, PCIe distance, "
      "IOMMU, ACS, BAR1, ARP, the daemon; PASS/WARN/FAIL/SKIP per line, exit 1 on any FAIL");
  doctor->add_option("--role", doc_role, "client (GPU checks) or storage (the gdrstored host)")
      ->capture_default_str()->check(CLI::IsMember({"client", "storage"}));
  // Hidden: tests point these at fake trees.
  // Also after the subcommand (`gdrctl doctor --json`), where people put it.
  doctor->add_flag("--json", c.json, "machine-readable output");
  doctor->add_option("--sysfs-root", doc.sysfs_root)->group("");
  doctor->add_option("--proc-root", doc.proc_root)->group("");

  gdrctl::ReplayOptions ro;
  std::string replay_pace = "recorded", replay_clients = "as-recorded";
  std::vector<std::string> replay_map;
  CLI::App* replay = app.add_subcommand(
      "replay", "issue the ops of a gdrstored --trace file against the daemon, one client per "
                "recorded client; recorded vs replayed ops, bytes and latency; exit 1 when an "
                "op fails");
  replay->add_option("file", ro.file, "trace file (gdrstored --trace)")->required();
  replay->add_option("--pace", replay_pace,
                     "recorded: each op at its recorded offset from the first; fast: back to "
                     "back, each client keeping its recorded number of ops in flight")
      ->capture_default_str()->check(CLI::IsMember({"recorded", "fast"}));
  replay->add_option("--clients", replay_clients,
                     "as-recorded (one client per recorded client) or N (recorded client i "
                     "replayed by client i % N)")
      ->capture_default_str();
  replay->add_option("--volume-map", replay_map,
                     "RECORDED=REPLAYED: issue a recorded volume's ops on another volume; "
                     "repeatable");
  replay->add_flag("--verify",
                   ro.verify,
                   "check gets against the volume's initial fill and store that fill with puts "
                   "(for a daemon whose volumes hold their initial fill)");
  replay->add_flag("--json", c.json, "machine-readable output");
  CLI::App* trace_cmd = app.add_subcommand("trace", "read a gdrstored --trace file");
  trace_cmd->require_subcommand(1);
  std::string show_file;
  uint64_t show_records = 20;
  CLI::App* trace_show = trace_cmd->add_subcommand(
      "show", "summary (clients, volumes, ops and bytes per kind, span) and the first records");
  trace_show->add_option("file", show_file, "trace file")->required();
  trace_show->add_option("-n,--records", show_records, "records to list")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "gdrctl: %s (see gdrctl --help)\n", e.what());
    return kExitUsage;
  }
  if (c.timeout_ms <= 0) return Fail(kExitUsage, "--timeout-ms must be > 0");
  if (absl::StatusOr<std::string> d = DaemonAddress(c, app.count("--port") > 0); d.ok()) {
    c.daemon = *std::move(d);
  } else {
    return Fail(kExitUsage, std::string(d.status().message()));
  }
  for (const std::string* gpu : {&wa.gpu, &ra.gpu, &bgpu}) {
    if (gpu->empty()) continue;
    if (absl::Status s = gdr::cuda::ValidateGpuSpec(*gpu); !s.ok()) {
      return Fail(kExitUsage, absl::StrCat("--gpu: ", s.message()));
    }
  }
  const bool on_cluster = !cluster_url.empty() || !cluster_file.empty();
  if (cluster->parsed() && !on_cluster) {
    return Fail(kExitUsage, "gdrctl cluster needs --cluster URL or --cluster-file FILE");
  }
  if (on_cluster && (write->parsed() || read->parsed() || bench->parsed() || cluster->parsed())) {
    absl::StatusOr<gdrstore::ClientOptions> o = ClientOptionsOf(c);
    if (!o.ok()) return Fail(o.status(), "connect");
    gdrstore::ClusterOptions co;
    co.etcd_url = cluster_url;
    co.members_file = cluster_file;
    co.client = *std::move(o);
    co.etcd_timeout = std::chrono::milliseconds(std::min<int64_t>(c.timeout_ms, 10000));
    auto cl = gdrstore::ClusterClient::Open(co);
    if (!cl.ok()) {
      return Fail(absl::IsInvalidArgument(cl.status()) ? kExitUsage : kExitFailed,
                  absl::StrCat("cluster: ", cl.status().message()));
    }
    if (cluster_status->parsed()) return gdrctl::ClusterStatus(**cl, c.json, std::cout);
    if (create_volume->parsed()) {
      std::vector<std::string> ids = absl::StrSplit(cv_members, ',', absl::SkipEmpty());
      return gdrctl::ClusterCreateVolume(**cl, cv_name, cv_unit, cv_replicas, ids, c.json,
                                         std::cout);
    }
    if (write->parsed() || read->parsed()) {
      const OpArgs& a = write->parsed() ? wa : ra;
      if (!a.gpu.empty() || a.buffer_offset != 0) {
        return Fail(kExitUsage, "--gpu and --buffer-offset are not offered with --cluster yet");
      }
      gdrctl::ClusterOpArgs ca{a.volume, a.offset, a.size, a.salt, a.verify};
      return gdrctl::ClusterOp(**cl, read->parsed(), ca, c.json, std::cout);
    }
    gdrctl::ClusterBenchArgs ba;
    ba.volume = bo.volume;
    ba.size = bo.size;
    ba.iterations = bo.iterations;
    ba.qd = bo.qd;
    if (btype == "read" || btype == "1") {
      ba.put = true;
    } else if (btype != "write" && btype != "0") {
      return Fail(kExitUsage, "bench -t must be write or read");
    }
    return gdrctl::ClusterBench(**cl, ba, c.json, std::cout);
  }
  if (trace_show->parsed()) return gdrctl::ShowTrace(show_file, show_records, std::cout, std::cerr);
  if (replay->parsed()) {
    ro.fast = replay_pace == "fast";
    ro.json = c.json;
    if (replay_clients != "as-recorded") {
      uint32_t n = 0;
      if (!absl::SimpleAtoi(replay_clients, &n) || n == 0) {
        return Fail(kExitUsage, absl::StrCat("--clients must be as-recorded or a count > 0, not '",
                                             replay_clients, "'"));
      }
      ro.clients = n;
    }
    if (absl::Status s = gdrctl::ParseVolumeMap(replay_map, &ro.volume_map); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    return gdrctl::RunReplay(ro, [&c] { return Connect(c); }, std::cout, std::cerr);
  }
  if (info->parsed()) return CmdInfo(c);
  if (write->parsed()) return CmdWrite(c, wa);
  if (read->parsed()) return CmdRead(c, ra);
  if (stats->parsed()) {
    so.json = c.json;
    so.interval = absl::Seconds(stats_interval_s);
    so.rpc_timeout = absl::Milliseconds(c.timeout_ms);
    auto client = Connect(c);
    if (!client.ok()) return Fail(client.status(), "connect");
    absl::Status s = gdrctl::RunStats((*client)->stub(), so);
    return s.ok() ? kExitOk : Fail(s, "stats");
  }
  if (bench->parsed()) {
    // The live line is for a person watching: never with -q, never in JSON mode, never when
    // stderr goes to a file or a pipe.
    const bool progress = !quiet && !c.json && ::isatty(STDERR_FILENO) == 1;
    return CmdBench(c, bo, btype,
                    bspan_opt->count() ? std::optional<uint64_t>(bspan) : std::nullopt, progress,
                    bgpu);
  }
  if (fault->parsed()) {
    if (fault_clear->parsed() && fault_ids.empty() == !fault_all) {
      return Fail(kExitUsage, "fault clear: name rule ids or give --all (not both)");
    }
    absl::StatusOr<gdrstore::ClientOptions> o = ClientOptionsOf(c);
    if (!o.ok()) return Fail(o.status(), "fault");
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(*o);
    if (!channel.ok()) return Fail(channel.status(), "fault");
    auto admin = gdrstore::v1::Admin::NewStub(*channel);
    const absl::Duration timeout = absl::Milliseconds(c.timeout_ms);
    if (fault_set->parsed()) {
      return gdrctl::FaultSet(admin.get(), fault_spec, c.json, timeout, std::cout);
    }
    if (fault_clear->parsed()) {
      return gdrctl::FaultClear(admin.get(), fault_ids, fault_all, c.json, timeout, std::cout);
    }
    return gdrctl::FaultList(admin.get(), c.json, timeout, std::cout);
  }
  if (topo->parsed()) return CmdTopo(c, sysfs_root, topo_rails);
  if (doctor->parsed()) {
    doc.json = c.json;
    doc.checks.role =
        doc_role == "storage" ? gdrctl::doctor::Role::kStorage : gdrctl::doctor::Role::kClient;
    doc.checks.daemon_address = c.daemon;
    doc.checks.daemon_explicit =
        app.count("--daemon") > 0 || app.count("--address") > 0 || app.count("--port") > 0;
    doc.checks.rdma_device = c.rdma_device;
    absl::StatusOr<gdrstore::ClientOptions> o = ClientOptionsOf(c);
    if (!o.ok()) return Fail(o.status(), "doctor");
    // Live verbs and CUDA answers describe this host, not a tree read from elsewhere.
    gdrctl::doctor::RealProbes probes(doc.sysfs_root == "/sys", *std::move(o));
    return gdrctl::doctor::RunDoctor(doc, probes, std::cout);
  }
  if (selftest->parsed()) {
    for (absl::string_view part : absl::StrSplit(st_sizes, ',', absl::SkipEmpty())) {
      absl::StatusOr<uint64_t> n = gdr::ParseSize(part);
      if (!n.ok() || *n == 0) return Fail(kExitUsage, absl::StrCat("--sizes: bad size '", part, "'"));
      st.sizes.push_back(*n);
    }
    absl::StatusOr<gdrstore::ClientOptions> o = ClientOptionsOf(c);
    if (!o.ok()) return Fail(o.status(), "connect");
    st.client = *std::move(o);
    return gdrctl::RunSelftest(st, std::cout) == 0 ? kExitOk : kExitFailed;
  }
  return kExitUsage;
}
