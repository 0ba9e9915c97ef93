#include "tests/common/fake_sysfs.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gdr::topo::testing {
namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

FakeSysfs::FakeSysfs(std::string root) : root_(std::move(root)) {
  fs::create_directories(root_);
}

std::string FakeSysfs::PciFunction(const std::vector<std::string>& path, int numa,
                                   const PciIds& ids) {
  const std::string rel = absl::StrCat("devices/", absl::StrJoin(path, "/"));
  const std::string dir = absl::StrCat(root_, "/", rel);
  WriteFile(dir + "/vendor", ids.vendor + "\n");
  WriteFile(dir + "/class", ids.cls + "\n");
  WriteFile(dir + "/device", ids.device + "\n");
  WriteFile(dir + "/numa_node", absl::StrCat(numa, "\n"));
  const fs::path links = fs::path(root_) / "bus/pci/devices";
  fs::create_directories(links);
  std::error_code ec;  // an existing link (the function made twice) is kept
  fs::create_symlink(fs::path("../../..") / rel, links / path.back(), ec);
  return rel;
}

std::string FakeSysfs::RdmaDevice(const std::vector<std::string>& path, const std::string& name) {
  const std::string rel = absl::StrCat("devices/", absl::StrJoin(path, "/"), "/infiniband/", name);
  const fs::path dev = fs::path(root_) / rel;
  fs::create_directories(dev);
  std::error_code ec;
  fs::create_symlink("../../", dev / "device", ec);
  const fs::path cls = fs::path(root_) / "class/infiniband";
  fs::create_directories(cls);
  fs::create_symlink(fs::path("../..") / rel, cls / name, ec);
  return rel;
}

void FakeSysfs::SoftRdmaDevice(const std::string& name) {
  const fs::path dev = fs::path(root_) / "devices/virtual/infiniband" / name;
  fs::create_directories(dev);
  const fs::path cls = fs::path(root_) / "class/infiniband";
  fs::create_directories(cls);
  std::error_code ec;
  fs::create_symlink(fs::path("../../devices/virtual/infiniband") / name, cls / name, ec);
}

void WriteDgxH100Node(const std::string& root) {
  FakeSysfs t(root);
  for (int sw = 0; sw < kDgxSwitches; ++sw) {
    // Bus numbers as the firmware hands them out below host bridge bus H: the switch's
    // upstream port on H+1, its downstream ports on H+2, the GPU on H+3 and the NIC on H+4.
    unsigned gpu_bus = 0;
    std::sscanf(kDgxGpus[sw], "0000:%x:", &gpu_bus);
    const unsigned h = gpu_bus - 3;
    const int numa = DgxSocketOf(sw);
    const std::vector<std::string> root_port = {absl::StrFormat("pci0000:%02x", h),
                                                absl::StrFormat("0000:%02x:01.0", h)};
    std::vector<std::string> up = root_port;
    up.push_back(absl::StrFormat("0000:%02x:00.0", h + 1));
    std::vector<std::string> gpu_port = up, nic_port = up;
    gpu_port.push_back(absl::StrFormat("0000:%02x:00.0", h + 2));
    nic_port.push_back(absl::StrFormat("0000:%02x:01.0", h + 2));
    t.PciFunction(root_port, numa, kRootPortIds);
    for (const std::vector<std::string>& port : {up, gpu_port, nic_port}) {
      t.PciFunction(port, numa, kSwitchPortIds);
    }
    std::vector<std::string> gpu = gpu_port, nic = nic_port;
    gpu.push_back(kDgxGpus[sw]);
    nic.push_back(kDgxNicAddresses[sw]);
    t.PciFunction(gpu, numa, kH100Ids);
    t.PciFunction(nic, numa, kConnectX7Ids);
    t.RdmaDevice(nic, kDgxNics[sw]);
  }
}

}  // namespace gdr::topo::testing
