// `gdrctl workload train|checkpoint|kvcache ...`: runs the workloads of the Python package
// (gdrstore.workload, in the python3-gdrstore .deb; one process per simulated accelerator,
// PyTorch for GPU memory and compute, matplotlib for the plots), so that there is one
// implementation of them. This command passes gdrctl's global target options on as the
// workload's own and replaces itself with `python3 -m gdrstore.workload`.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/gdrctl/command.h"

namespace gdrctl {
namespace {

namespace fs = std::filesystem;

// The directory this gdrctl runs from (build tree or install prefix's bin).
fs::path OwnDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// Where the gdrstore package lies for a gdrctl run from its build tree: the source tree it was
// built from. Empty for an installed gdrctl: python3 finds the package the python3-gdrstore
// .deb installs on its own path.
std::string PackageDir(const fs::path& own) {
  std::error_code ec;
  const fs::path source(GDR_SOURCE_PYTHON_DIR);
  if (fs::is_regular_file(own / "libgdrclient.so.1", ec) &&
      fs::is_regular_file(source / "gdrstore" / "workload" / "__main__.py", ec)) {
    return fs::weakly_canonical(source, ec).string();
  }
  return "";
}

bool Has(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

class WorkloadCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* w = app.add_subcommand(
        "workload",
        "MLPerf-Storage-style train, checkpoint and KV-cache workloads (gdrctl workload "
        "train --help; docs/workloads.md)");
    w->prefix_command();  // everything after `workload` is the workload's own
    w->allow_extras();
    app_ = w;
    return w;
  }

  bool PrintsJson() const override { return false; }

  int Run(const Context& ctx) override {
    const GlobalOptions& g = ctx.global;
    std::vector<std::string> args = app_->remaining();
    if (args.empty()) {
      return Fail(kExitUsage, "workload needs one of train, checkpoint, kvcache");
    }
    if (!g.cluster_file.empty()) {
      return Fail(kExitUsage,
                  "workload makes its cluster volumes in etcd: give --cluster etcd://..., not "
                  "--cluster-file");
    }
    // gdrctl's global options become the workload's, unless it names its own.
    auto pass = [&](const std::string& flag, const std::string& value) {
      if (!value.empty() && !Has(args, flag)) args.insert(args.begin() + 1, {flag, value});
    };
    if (!g.cluster_url.empty()) {
      pass("--cluster", g.cluster_url);
    } else {
      pass("--daemon", g.daemon);
    }
    pass("--transport", g.transport);
    pass("--agent", g.agent);
    pass("--local-socket", g.local_socket);
    pass("--require", g.require);
    pass("--rdma-device", g.rdma_device);
    pass("--token-file", g.token_file);
    pass("--tls-ca", g.tls_ca);
    pass("--tls-cert", g.tls_cert);
    pass("--tls-key", g.tls_key);
    pass("--tls-server-name", g.tls_server_name);
    pass("--timeout", absl::StrCat(static_cast<double>(g.timeout_ms) / 1000.0));
    auto pass_flag = [&](const std::string& flag, bool on) {
      if (on && !Has(args, flag)) args.insert(args.begin() + 1, flag);
    };
    pass_flag("--crc", g.crc32c);
    pass_flag("--fail-when-full", g.fail_when_full);
    pass_flag("--json", g.json);

    const fs::path own = OwnDir();
    const std::string package = PackageDir(own);
    if (!package.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      const std::string path = old != nullptr && *old != '\0' ? package + ":" + old : package;
      ::setenv("PYTHONPATH", path.c_str(), 1);
    }
    std::error_code ec;
    if (std::getenv("GDRSTORE_LIBRARY") == nullptr &&
        fs::is_regular_file(own / "libgdrclient.so.1", ec)) {  // the build tree's library
      ::setenv("GDRSTORE_LIBRARY", (own / "libgdrclient.so.1").c_str(), 1);
    }
    const char* env_python = std::getenv("GDRSTORE_PYTHON");
    const std::string python = env_python != nullptr && *env_python != '\0'
                                   ? env_python
                                   : "/usr/bin/python3";
    std::vector<std::string> argv = {python, "-m", "gdrstore.workload"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(python.c_str(), cargv.data());
    return Fail(kExitFailed, absl::StrCat("cannot run ", python, " (set GDRSTORE_PYTHON to a "
                                          "python3 with the gdrstore package): ",
                                          std::strerror(errno)));
  }

 private:
  CLI::App* app_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> NewWorkloadCommand() { return std::make_unique<WorkloadCommand>(); }

}  // namespace gdrctl
