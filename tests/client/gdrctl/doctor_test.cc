// `gdrctl doctor`'s checks on fake sysfs/procfs trees (fake_host.h) with the live probes
// replaced: a healthy host where every line passes, a host with every fault where each line
// has the verdict that fault calls for, and the rules on their own (RoCE MTU from the netdev
// MTU, the ACS capability walk, nvidia-smi's distance names, the report's JSON).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/gdrctl/doctor/checks.h"
#include "client/gdrctl/doctor/doctor.h"
#include "client/gdrctl/doctor/host_facts.h"
#include "client/gdrctl/doctor/pci_config.h"
#include "client/gdrctl/doctor/report.h"
#include "common/base/json.h"
#include "tests/client/gdrctl/fake_host.h"

namespace gdrctl::doctor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::FakeHost;
using testing::kGpu0;
using testing::kGpu1;

class FakeProbes : public Probes {
 public:
  std::map<std::string, PortQuery> ports;  // "mlx5_0/1"; others answer UNAVAILABLE
  std::map<std::string, absl::StatusOr<DcAnswer>> dc;
  Memlock memlock{.unlimited = true};
  absl::StatusOr<std::vector<CudaGpu>> gpus = absl::FailedPreconditionError("no driver");
  std::map<int, gdr::cuda::GpuDirectAttributes> gpu_direct;  // others: FAILED_PRECONDITION
  absl::StatusOr<std::string> registration = absl::UnavailableError("not asked");
  std::string registration_device;
  absl::StatusOr<DaemonOffer> daemon = absl::UnavailableError("connection refused");

  absl::StatusOr<PortQuery> QueryPort(const std::string& device, int port) override {
    auto it = ports.find(absl::StrCat(device, "/", port));
    if (it == ports.end()) return absl::UnavailableError("no such verbs device");
    return it->second;
  }
  absl::StatusOr<DcAnswer> ProbeDc(const std::string& device) override {
    auto it = dc.find(device);
    if (it == dc.end()) return absl::UnavailableError("cannot open");
    return it->second;
  }
  Memlock ReadMemlock() override { return memlock; }
  absl::StatusOr<std::vector<CudaGpu>> ListGpus() override { return gpus; }
  absl::StatusOr<gdr::cuda::GpuDirectAttributes> GpuDirect(int ordinal) override {
    auto it = gpu_direct.find(ordinal);
    if (it == gpu_direct.end()) return absl::FailedPreconditionError("no driver");
    return it->second;
  }
  absl::StatusOr<std::string> ProbeGpuRegistration(int, const std::string& device) override {
    registration_device = device;
    return registration;
  }
  absl::StatusOr<DaemonOffer> GetInfo(const std::string&) override { return daemon; }
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gdr-doctor-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The verdict of the one line with `check` and `subject`; fails the test when there is not
// exactly one.
Verdict VerdictOf(const std::vector<CheckResult>& results, const std::string& check,
                  const std::string& subject) {
  const CheckResult* found = nullptr;
  int n = 0;
  for (const CheckResult& r : results) {
    if (r.check == check && r.subject == subject) {
      found = &r;
      ++n;
    }
  }
  EXPECT_EQ(n, 1) << "lines for " << check << " / " << subject;
  return found ? found->verdict : Verdict::kSkip;
}

const CheckResult& Line(const std::vector<CheckResult>& results, const std::string& check,
                        const std::string& subject) {
  for (const CheckResult& r : results)
    if (r.check == check && r.subject == subject) return r;
  ADD_FAILURE() << "no line " << check << " / " << subject;
  static CheckResult none;
  return none;
}

std::string Dump(const std::vector<CheckResult>& results) {
  return FormatText(ReportHeader{"test", "client", "", ""}, results);
}

std::vector<CudaGpu> TwoGpus(bool dma_buf) {
  return {CudaGpu{0, kGpu0, "NVIDIA H100", uint64_t{80} << 30, dma_buf},
          CudaGpu{1, kGpu1, "NVIDIA H100", uint64_t{80} << 30, dma_buf}};
}

TEST(Doctor, HealthyHostPassesEveryCheck) {
  TempDir dir;
  testing::WriteHealthyHost(dir.path());
  FakeProbes p;
  p.ports["mlx5_0/1"] = PortQuery{4096, 4096};  // mlx5_1: derived from its netdev MTU
  p.dc["mlx5_0"] = DcAnswer{true, true, ""};
  p.dc["mlx5_1"] = DcAnswer{true, true, ""};
  p.gpus = TwoGpus(true);
  p.gpu_direct[0] = {.rdma_supported = true, .writes_ordering = 100, .flush_options = 3,
                     .dma_buf = true};
  p.gpu_direct[1] = {.rdma_supported = true, .writes_ordering = 0, .flush_options = 1,
                     .dma_buf = true};  // flushed after each get: fine
  p.registration = std::string("dma-buf");
  p.daemon = DaemonOffer{"0.1.0", {{"tcp", true, ""}, {"rc", true, "mlx5_0"}}, true, "mlx5_0", 1,
                         "ACTIVE", "Ethernet", "10.0.0.2", 4096};
  const HostFacts facts = ReadHostFacts(dir.path() + "/sys", dir.path() + "/proc");
  const std::vector<CheckResult> results = RunChecks(facts, p, CheckOptions{});
  for (const CheckResult& r : results) {
    EXPECT_EQ(r.verdict, Verdict::kPass) << r.check << " " << r.subject << ": " << r.found;
    EXPECT_TRUE(r.advice.empty()) << r.check;
  }
  // Each per-thing check has a line for each thing.
  for (const char* port : {"mlx5_0 port 1", "mlx5_1 port 1"}) {
    for (const char* check : {"rdma.port", "rdma.gid", "rdma.mtu"}) {
      EXPECT_EQ(VerdictOf(results, check, port), Verdict::kPass) << check << " " << port;
    }
  }
  EXPECT_THAT(Line(results, "rdma.mtu", "mlx5_0 port 1").found, HasSubstr("ibv_query_port"));
  EXPECT_THAT(Line(results, "rdma.mtu", "mlx5_1 port 1").found,
              HasSubstr("active MTU 4096 (derived from the netdev MTU, eth3 MTU 9000)"));
  EXPECT_THAT(Line(results, "rdma.gid", "mlx5_0 port 1").found, HasSubstr("10.0.0.1"));
  const std::string g0 = absl::StrCat("GPU 0 ", kGpu0), g1 = absl::StrCat("GPU 1 ", kGpu1);
  EXPECT_THAT(Line(results, "gpu.nic", g0).found, HasSubstr("nearest NIC mlx5_0 (0000:03:00.0): PIX"));
  EXPECT_THAT(Line(results, "gpu.nic", g1).found, HasSubstr("nearest NIC mlx5_1 (0000:83:00.0): PIX"));
  EXPECT_EQ(VerdictOf(results, "pcie.acs", g0), Verdict::kPass);
  EXPECT_THAT(Line(results, "gpu.direct", g0).found, HasSubstr("gets need no flush"));
  EXPECT_THAT(Line(results, "gpu.direct", g1).found, HasSubstr("each get is flushed"));
  EXPECT_EQ(VerdictOf(results, "gpu.bar1", g1), Verdict::kPass);
  EXPECT_EQ(VerdictOf(results, "iommu", "mlx5_0 0000:03:00.0"), Verdict::kPass);
  EXPECT_EQ(VerdictOf(results, "net.arp", "eth2"), Verdict::kPass);
  EXPECT_EQ(VerdictOf(results, "net.arp", "eth3"), Verdict::kPass);
  EXPECT_EQ(VerdictOf(results, "gpu.registration", ""), Verdict::kPass);
  EXPECT_EQ(p.registration_device, "mlx5_0");  // GPU 0's nearest NIC
  EXPECT_EQ(VerdictOf(results, "daemon", "127.0.0.1:50051"), Verdict::kPass);
}

TEST(Doctor, FaultyHostGetsTheVerdictOfEachFault) {
  TempDir dir;
  testing::WriteFaultyHost(dir.path());
  FakeProbes p;
  p.dc["mlx5_0"] = DcAnswer{true, false, "mlx5_0 cannot create a DC initiator: EOPNOTSUPP"};
  p.memlock = Memlock{.unlimited = false, .soft_bytes = 64 << 10, .hard_bytes = 64 << 10};
  p.gpus = TwoGpus(false);
  p.gpu_direct[0] = {.rdma_supported = true, .writes_ordering = 0, .flush_options = 0};
  p.gpu_direct[1] = {.rdma_supported = false};
  p.registration = absl::FailedPreconditionError("cannot register GPU memory: tried dma-buf ...");
  CheckOptions o;
  o.daemon_address = "10.0.0.9:50051";
  o.daemon_explicit = true;
  const HostFacts facts = ReadHostFacts(dir.path() + "/sys", dir.path() + "/proc");
  const std::vector<CheckResult> r = RunChecks(facts, p, o);
  SCOPED_TRACE(Dump(r));
  const std::string g0 = absl::StrCat("GPU 0 ", kGpu0), g1 = absl::StrCat("GPU 1 ", kGpu1);

  EXPECT_EQ(VerdictOf(r, "rdma.devices", ""), Verdict::kPass);
  EXPECT_EQ(VerdictOf(r, "rdma.port", "mlx5_0 port 1"), Verdict::kPass);
  // DOWN while another port is ACTIVE: a WARN (it may be unused), with what to do.
  EXPECT_EQ(VerdictOf(r, "rdma.port", "mlx5_1 port 1"), Verdict::kWarn);
  EXPECT_THAT(Line(r, "rdma.port", "mlx5_1 port 1").advice, HasSubstr("ip link set eth3 up"));
  EXPECT_EQ(VerdictOf(r, "rdma.gid", "mlx5_0 port 1"), Verdict::kFail);
  EXPECT_THAT(Line(r, "rdma.gid", "mlx5_0 port 1").found, HasSubstr("only IB/RoCE v1"));
  EXPECT_EQ(VerdictOf(r, "rdma.gid", "mlx5_1 port 1"), Verdict::kPass);
  for (const char* port : {"mlx5_0 port 1", "mlx5_1 port 1"}) {
    EXPECT_EQ(VerdictOf(r, "rdma.mtu", port), Verdict::kWarn) << port;
    EXPECT_THAT(Line(r, "rdma.mtu", port).found, HasSubstr("active MTU 1024"));
    EXPECT_THAT(Line(r, "rdma.mtu", port).advice, HasSubstr("mtu 9000"));
  }
  EXPECT_EQ(VerdictOf(r, "rdma.dc", "mlx5_0"), Verdict::kWarn);
  EXPECT_EQ(VerdictOf(r, "rdma.dc", "mlx5_1"), Verdict::kSkip);
  EXPECT_EQ(VerdictOf(r, "rdma.sriov", "mlx5_0"), Verdict::kPass);
  EXPECT_EQ(VerdictOf(r, "rdma.sriov", "mlx5_1"), Verdict::kWarn);
  EXPECT_THAT(Line(r, "rdma.sriov", "mlx5_1").found, HasSubstr("virtual function of 0000:05:00.0"));
  for (const std::string& s : {std::string("mlx5_0 0000:03:00.0"),
                              std::string("mlx5_1 0000:05:00.2"), g0, g1}) {
    EXPECT_EQ(VerdictOf(r, "iommu", s), Verdict::kWarn) << s;
    EXPECT_THAT(Line(r, "iommu", s).advice, HasSubstr("iommu=pt"));
  }
  EXPECT_EQ(VerdictOf(r, "memlock", ""), Verdict::kWarn);
  EXPECT_THAT(Line(r, "memlock", "").found, HasSubstr("64 KiB"));
  EXPECT_THAT(Line(r, "memlock", "").advice, HasSubstr("LimitMEMLOCK=infinity"));
  EXPECT_EQ(VerdictOf(r, "gpu", ""), Verdict::kPass);
  EXPECT_EQ(VerdictOf(r, "gpu.registration", ""), Verdict::kFail);
  EXPECT_THAT(Line(r, "gpu.registration", "").advice,
              HasSubstr("modprobe nvidia-peermem cannot work here"));
  EXPECT_EQ(VerdictOf(r, "gpu.nic", g0), Verdict::kPass);
  EXPECT_EQ(VerdictOf(r, "gpu.nic", g1), Verdict::kWarn);
  EXPECT_THAT(Line(r, "gpu.nic", g1).found, HasSubstr(": SYS"));
  EXPECT_EQ(VerdictOf(r, "pcie.acs", g0), Verdict::kWarn);
  EXPECT_THAT(Line(r, "pcie.acs", g0).found,
              HasSubstr("0000:02:00.0 (ReqRedir+ CmpltRedir+), 0000:02:01.0 (ReqRedir+"));
  EXPECT_EQ(VerdictOf(r, "pcie.acs", g1), Verdict::kSkip);  // across sockets: moot
  EXPECT_EQ(VerdictOf(r, "gpu.direct", g0), Verdict::kWarn);  // no ordering, no flush
  EXPECT_THAT(Line(r, "gpu.direct", g0).found, HasSubstr("offers no flush"));
  EXPECT_EQ(VerdictOf(r, "gpu.direct", g1), Verdict::kFail);  // no GPUDirect RDMA at all
  EXPECT_EQ(VerdictOf(r, "gpu.bar1", g0), Verdict::kWarn);
  EXPECT_THAT(Line(r, "gpu.bar1", g0).found, HasSubstr("BAR1 256 MiB"));
  for (const char* netdev : {"eth2", "eth3"}) {
    EXPECT_EQ(VerdictOf(r, "net.arp", netdev), Verdict::kWarn) << netdev;
    EXPECT_THAT(Line(r, "net.arp", netdev).advice,
                HasSubstr(absl::StrCat("net.ipv4.conf.", netdev, ".arp_ignore = 1")));
  }
  EXPECT_EQ(VerdictOf(r, "daemon", "10.0.0.9:50051"), Verdict::kFail);
}

TEST(Doctor, WithoutLiveProbesRegistrationIsJudgedFromModulesAndKernel) {
  TempDir healthy, faulty;
  testing::WriteHealthyHost(healthy.path());
  testing::WriteFaultyHost(faulty.path());
  FakeProbes p;  // CUDA answers "no driver" -> registration from the facts
  p.gpus = absl::UnavailableError("live probes are off");
  auto verdict = [&](const std::string& root) {
    const HostFacts f = ReadHostFacts(root + "/sys", root + "/proc");
    return VerdictOf(RunChecks(f, p, CheckOptions{}), "gpu.registration", "");
  };
  EXPECT_EQ(verdict(healthy.path()), Verdict::kPass);
  EXPECT_EQ(verdict(faulty.path()), Verdict::kFail);
  // A kernel with MOFED's peer-memory API: nvidia-peermem is the advice, not impossible.
  FakeHost(faulty.path()).Write("proc/kallsyms",
                                "0000000000000000 T ib_register_peer_memory_client\t[ib_core]\n");
  const HostFacts f = ReadHostFacts(faulty.path() + "/sys", faulty.path() + "/proc");
  EXPECT_TRUE(f.peer_memory_api);
  EXPECT_THAT(Line(RunChecks(f, p, CheckOptions{}), "gpu.registration", "").advice,
              HasSubstr("or modprobe nvidia-peermem"));
}

TEST(Doctor, NoActivePortAnywhereIsAFail) {
  TempDir dir;
  FakeHost h(dir.path());
  h.Bridge({"pci0000:00", "0000:00:01.0"}, 0);
  h.Nic({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, 0, "mlx5_0");
  h.Port("mlx5_0", 1, "DOWN", "Polling", "Ethernet", {});
  FakeProbes p;
  const HostFacts f = ReadHostFacts(h.sys(), h.proc());
  const std::vector<CheckResult> r = RunChecks(f, p, CheckOptions{});
  EXPECT_EQ(VerdictOf(r, "rdma.port", "mlx5_0 port 1"), Verdict::kFail);
  EXPECT_THAT(Line(r, "rdma.port", "mlx5_0 port 1").advice, HasSubstr("cable"));
  EXPECT_EQ(VerdictOf(r, "rdma.gid", "mlx5_0 port 1"), Verdict::kFail);
  EXPECT_EQ(VerdictOf(r, "gpu", ""), Verdict::kSkip);  // no GPU at all
  EXPECT_EQ(VerdictOf(r, "net.arp", ""), Verdict::kSkip);
  EXPECT_EQ(VerdictOf(r, "daemon", "127.0.0.1:50051"), Verdict::kSkip);  // not asked for
}

TEST(Doctor, EmptyHostFailsOnRdmaAndExitsOne) {
  TempDir dir;
  FakeHost h(dir.path());
  FakeProbes p;
  DoctorOptions o;
  o.sysfs_root = h.sys();
  o.proc_root = h.proc();
  std::ostringstream out;
  EXPECT_EQ(RunDoctor(o, p, out), 1);
  EXPECT_THAT(out.str(), HasSubstr("FAIL rdma.devices"));
  EXPECT_THAT(out.str(), HasSubstr("     -> load the NIC's RDMA driver"));
  EXPECT_THAT(out.str(), HasSubstr("summary: 1 PASS, 0 WARN, 1 FAIL"));  // memlock passes
}

TEST(Doctor, StorageRoleSkipsGpusAndWarnsAboutATcpOnlyDaemon) {
  TempDir dir;
  testing::WriteHealthyHost(dir.path());
  FakeProbes p;
  DaemonOffer tcp_only;
  tcp_only.version = "0.1.0";
  tcp_only.transports = {{"tcp", true, ""}, {"rc", false, "no RDMA device"}};
  p.daemon = tcp_only;
  CheckOptions o;
  o.role = Role::kStorage;
  const std::vector<CheckResult> r =
      RunChecks(ReadHostFacts(dir.path() + "/sys", dir.path() + "/proc"), p, o);
  EXPECT_EQ(VerdictOf(r, "gpu", ""), Verdict::kSkip);
  for (const CheckResult& c : r) EXPECT_NE(c.check, "gpu.bar1");
  EXPECT_EQ(VerdictOf(r, "daemon", "127.0.0.1:50051"), Verdict::kWarn);
  EXPECT_THAT(Line(r, "daemon", "127.0.0.1:50051").found, HasSubstr("rc unavailable (no RDMA"));
}

TEST(Doctor, AcsUnreadableWithoutRootIsASkip) {
  TempDir dir;
  FakeHost h(dir.path());
  h.Bridge({"pci0000:00", "0000:00:01.0"}, 0, -1);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, 0, -1);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0"}, 0, -1);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0"}, 0, -1);
  h.Nic({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}, 0,
        "mlx5_0");
  h.Gpu({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", kGpu0}, 0, 1ull << 34);
  h.Iommu(kGpu0, "");  // IOMMU off for the GPU
  FakeProbes p;
  const std::vector<CheckResult> r = RunChecks(ReadHostFacts(h.sys(), h.proc()), p, {});
  const std::string g0 = absl::StrCat("GPU ", kGpu0);  // CUDA unknown: no ordinal
  EXPECT_EQ(VerdictOf(r, "pcie.acs", g0), Verdict::kSkip);
  EXPECT_THAT(Line(r, "pcie.acs", g0).found, HasSubstr("readable by root only"));
  EXPECT_EQ(VerdictOf(r, "iommu", g0), Verdict::kPass);
  EXPECT_THAT(Line(r, "iommu", g0).found, HasSubstr("IOMMU is off"));
  EXPECT_EQ(VerdictOf(r, "gpu", ""), Verdict::kFail);  // a GPU on the bus, CUDA sees none
}

TEST(Doctor, MemlockWithCapIpcLockPasses) {
  TempDir dir;
  FakeHost h(dir.path());
  FakeProbes p;
  p.memlock = Memlock{.unlimited = false, .soft_bytes = 8 << 20, .hard_bytes = 8 << 20,
                      .cap_ipc_lock = true};
  EXPECT_EQ(VerdictOf(RunChecks(ReadHostFacts(h.sys(), h.proc()), p, {}), "memlock", ""),
            Verdict::kPass);
}

TEST(Doctor, DottedInterfaceNamesUseSlashesInSysctlKeys) {
  TempDir dir;
  FakeHost h(dir.path());
  h.Bridge({"pci0000:00", "0000:00:01.0"}, 0);
  h.Nic({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, 0, "mlx5_0");
  h.Nic({"pci0000:00", "0000:00:01.0", "0000:01:00.1"}, 0, "mlx5_1");
  h.Port("mlx5_0", 1, "ACTIVE", "LinkUp", "Ethernet",
         {{testing::MappedGid("10.1.0.1"), "RoCE v2", "eth0.100"}});
  h.Port("mlx5_1", 1, "ACTIVE", "LinkUp", "Ethernet",
         {{testing::MappedGid("10.2.0.1"), "RoCE v2", "eth1"}});
  h.Arp("all", 1, 0);  // conf/all raises arp_ignore for every interface
  h.Arp("eth0.100", 0, 2);
  h.Arp("eth1", 0, 1);
  FakeProbes p;
  const std::vector<CheckResult> r = RunChecks(ReadHostFacts(h.sys(), h.proc()), p, {});
  EXPECT_EQ(VerdictOf(r, "net.arp", "eth0.100"), Verdict::kPass);
  EXPECT_EQ(VerdictOf(r, "net.arp", "eth1"), Verdict::kWarn);
  EXPECT_THAT(Line(r, "net.arp", "eth1").found, HasSubstr("arp_ignore 1, arp_announce 1"));
  h.Arp("eth0.100", 0, 0);
  const std::vector<CheckResult> r2 = RunChecks(ReadHostFacts(h.sys(), h.proc()), p, {});
  EXPECT_THAT(Line(r2, "net.arp", "eth0.100").advice,
              HasSubstr("net.ipv4.conf.eth0/100.arp_announce = 2"));
}

TEST(DoctorRules, RoceMtuFromNetdevMtu) {
  EXPECT_EQ(RoceMtuForNetdev(9000), 4096);
  EXPECT_EQ(RoceMtuForNetdev(4200), 4096);
  EXPECT_EQ(RoceMtuForNetdev(4191), 2048);  // 4096 + 96 bytes of headers is the floor for 4096
  EXPECT_EQ(RoceMtuForNetdev(4192), 4096);
  EXPECT_EQ(RoceMtuForNetdev(1500), 1024);
  EXPECT_EQ(RoceMtuForNetdev(1100), 512);
  EXPECT_EQ(RoceMtuForNetdev(300), 0);
}

TEST(DoctorRules, KernelVersion) {
  EXPECT_EQ(KernelVersion("5.15.0-91-generic"), std::make_pair(5, 15));
  EXPECT_EQ(KernelVersion("6.1.0-18-amd64"), std::make_pair(6, 1));
  EXPECT_EQ(KernelVersion("5.12-rc1"), std::make_pair(5, 12));
  EXPECT_FALSE(KernelVersion("").has_value());
  EXPECT_FALSE(KernelVersion("linux").has_value());
}

TEST(DoctorRules, AcsCapabilityWalk) {
  EXPECT_FALSE(ParseAcs(std::string(64, '\0')).has_value());  // non-root view
  std::string cfg(4096, '\0');
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) cfg[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(0x100, 0x0001u | (1u << 16) | (0x200u << 20));  // AER -> 0x200
  put32(0x200, 0x0019u | (1u << 16) | (0x300u << 20));  // secondary PCIe -> 0x300
  put32(0x300, 0x000Du | (1u << 16));                   // ACS, last
  put32(0x304, 0x0004u << 16);                          // control: ReqRedir only
  std::optional<AcsState> acs = ParseAcs(cfg);
  ASSERT_TRUE(acs.has_value());
  EXPECT_TRUE(acs->present);
  EXPECT_TRUE(acs->request_redirect());
  EXPECT_FALSE(acs->completion_redirect());
  EXPECT_EQ(acs->Describe(), "ReqRedir+ CmpltRedir-");
  // A list that points back at itself ends without ACS instead of spinning.
  put32(0x200, 0x0019u | (1u << 16) | (0x100u << 20));
  acs = ParseAcs(cfg);
  ASSERT_TRUE(acs.has_value());
  EXPECT_FALSE(acs->present);
}

TEST(DoctorRules, NvidiaSmiDistanceNames) {
  using gdr::topo::Relation;
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kSameSwitch, 4), "PIX");
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kSameSwitch, 6), "PXB");
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kSameRootPort, 5), "PXB");
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kSameHostBridge, 4), "PHB");
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kSameNumaNode, 4), "NODE");
  EXPECT_STREQ(NvidiaSmiDistance(Relation::kAcrossSockets, 4), "SYS");
}

TEST(DoctorReport, JsonEscapesAndCounts) {
  // The report's strings go through the one JSON writer (common/base/json.h).
  EXPECT_EQ(gdr::json::Dump(gdr::json::Json("a\"b\\c\nd\x01")), "\"a\\\"b\\\\c\\nd\\u0001\"");
  const std::string json = FormatJson(
      ReportHeader{"h", "client", "/sys", "/proc"},
      {CheckResult{"memlock", "", Verdict::kWarn, "64 KiB", "ulimit -l unlimited"},
       CheckResult{"rdma.devices", "", Verdict::kFail, "none", "load"}});
  EXPECT_THAT(json, HasSubstr("\"status\":\"WARN\""));
  EXPECT_THAT(json, HasSubstr("\"summary\":{\"pass\":0,\"warn\":1,\"fail\":1,\"skip\":0}"));
}

}  // namespace
}  // namespace gdrctl::doctor
