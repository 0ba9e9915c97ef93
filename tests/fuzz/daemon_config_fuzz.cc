// Fuzzes gdrstored's config file (daemon/ops/daemon_config.h ParseDaemonConfig with --config):
// the text an operator writes and SIGHUP re-reads, through the key = value reader and every
// check the daemon applies after it (sizes, volume specs, modes, ranges). In process: no
// daemon starts. --token-file on the command line overrides whatever path the file names, so
// the fuzzer reads no file but its own two.
//
// Properties: it never crashes or throws; a refusal is INVALID_ARGUMENT (CANCELLED for a help
// request); an accepted config is one the daemon can start with (volume names unique, limits
// in range); and SIGHUP's plan (daemon/ops/reload.h) is consistent for it: reloading the same
// file changes nothing, and a reload from the defaults to it leaves nothing more to apply.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/ops/reload.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// An in-memory file and its /proc path.
struct MemFile {
  explicit MemFile(const char* name) : fd(::memfd_create(name, MFD_CLOEXEC)) {
    GDR_FUZZ_CHECK(fd >= 0);
    path = absl::StrCat("/proc/self/fd/", fd);
  }
  void Set(const uint8_t* data, size_t size) const {
    GDR_FUZZ_CHECK(::ftruncate(fd, 0) == 0);
    GDR_FUZZ_CHECK(size == 0 || ::pwrite(fd, data, size, 0) == static_cast<ssize_t>(size));
  }
  int fd;
  std::string path;
};

constexpr char kToken[] = "fuzz-token-0123456789abcdef\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const MemFile* config = new MemFile("gdrstored.conf");
  static const MemFile* tokens = [] {
    auto* f = new MemFile("tokens");
    f->Set(reinterpret_cast<const uint8_t*>(kToken), sizeof(kToken) - 1);
    return f;
  }();
  config->Set(data, size);
  std::vector<std::string> args = {"gdrstored", "--config", config->path, "--token-file",
                                   tokens->path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  absl::StatusOr<gdr::DaemonConfig> cfg =
      gdr::ParseDaemonConfig(static_cast<int>(argv.size()), argv.data());
  if (!cfg.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(cfg.status()) || absl::IsCancelled(cfg.status()));
    return 0;
  }
  GDR_FUZZ_CHECK(!cfg->volumes.empty());
  absl::flat_hash_set<std::string> names;
  for (const gdr::VolumeSpec& v : cfg->volumes) {
    GDR_FUZZ_CHECK(gdr::IsValidVolumeName(v.name) && v.size > 0);
    GDR_FUZZ_CHECK(v.file.empty() || v.file.front() == '/');
    GDR_FUZZ_CHECK(names.insert(v.name).second);  // Store::Create refuses a repeated name
  }
  GDR_FUZZ_CHECK(cfg->limits.max_op_bytes > 0 && cfg->limits.max_inflight_bytes > 0);
  GDR_FUZZ_CHECK(cfg->limits.max_inflight_ops >= 1 && cfg->limits.max_inflight_per_stream >= 1);
  GDR_FUZZ_CHECK(cfg->tcp.chunk_bytes >= 4096 && cfg->tcp.chunk_bytes <= (64u << 20));
  GDR_FUZZ_CHECK(cfg->limits.chunk_bytes == cfg->tcp.chunk_bytes);
  // The fixture's token file: one bare token, which may do everything.
  GDR_FUZZ_CHECK(cfg->tokens.size() == 1 &&
                 cfg->tokens[0].value == "fuzz-token-0123456789abcdef" &&
                 cfg->tokens[0].get.all && cfg->tokens[0].put.all);

  const gdr::ReloadPlan same = gdr::PlanReload(*cfg, *cfg);
  GDR_FUZZ_CHECK(same.applied.empty() && same.needs_restart.empty());
  static const gdr::DaemonConfig* defaults = [&] {
    config->Set(nullptr, 0);
    absl::StatusOr<gdr::DaemonConfig> d =
        gdr::ParseDaemonConfig(static_cast<int>(argv.size()), argv.data());
    GDR_FUZZ_CHECK(d.ok());
    return new gdr::DaemonConfig(*std::move(d));
  }();
  const gdr::ReloadPlan from_defaults = gdr::PlanReload(*defaults, *cfg);
  GDR_FUZZ_CHECK(gdr::PlanReload(from_defaults.effective, *cfg).applied.empty());
  return 0;
}
