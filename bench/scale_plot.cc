#include "bench/scale_plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "bench/temp_path.h"

#ifndef GDR_BENCH_SOURCE_DIR
#define GDR_BENCH_SOURCE_DIR "bench"
#endif

extern char** environ;

namespace gdrbench {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
// plot_scale.py's exit status when matplotlib cannot be imported.
constexpr int kNoMatplotlib = 3;

// Beside this binary (the build copies it there), else in the source tree it was built from.
std::string PlotScript() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path beside = self.parent_path() / "plot_scale.py";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return std::string(GDR_BENCH_SOURCE_DIR) + "/plot_scale.py";
}

}  // namespace

std::string PlotDataPath(const std::string& png) {
  if (absl::EndsWithIgnoreCase(png, ".png")) return png.substr(0, png.size() - 4) + ".json";
  return png + ".json";
}

PlotResult WriteScalePlot(const std::string& json, const std::string& png) {
  PlotResult r;
  const std::string data = PlotDataPath(png);
  {
    std::ofstream out(data, std::ios::trunc);
    out << json << "\n";
    if (!out.good()) {
      r.note = absl::StrCat("no plot: cannot write ", data);
      return r;
    }
  }
  const std::string script = PlotScript();
  const std::string elsewhere =
      absl::StrCat("make it where matplotlib is with: ", script, " ", data, " ", png);
  if (::access(kPython, X_OK) != 0) {
    r.note = absl::StrCat("no plot: ", kPython, " is missing; the data is in ", data, "; ",
                          elsewhere);
    return r;
  }
  std::string out_template = TempTemplate("gdr_bench_plot");
  const int out_fd = ::mkstemp(out_template.data());
  if (out_fd < 0) {
    r.note = absl::StrCat("no plot: mkstemp failed; the data is in ", data);
    return r;
  }
  std::vector<std::string> args = {kPython, script, data, png};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, kPython, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_fd);
  int ws = 0;
  if (rc == 0) {
    while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
  }
  std::stringstream said;
  said << std::ifstream(out_template).rdbuf();
  ::unlink(out_template.c_str());
  const int code = rc != 0 ? -1 : (WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
  if (code == 0) {
    r.plotted = true;
    r.note = absl::StrCat("plot: ", png, " (data: ", data, ")");
  } else if (code == kNoMatplotlib) {
    r.note = absl::StrCat("no plot: ", kPython,
                          " has no matplotlib (Debian: apt install python3-matplotlib); the data "
                          "is in ",
                          data, "; ", elsewhere);
  } else {
    std::string text(absl::StripTrailingAsciiWhitespace(said.str()));
    if (text.size() > 600) text = "..." + text.substr(text.size() - 600);
    r.note = absl::StrCat("no plot: ", script, " failed (exit ", code, "): ", text,
                          "; the data is in ", data);
  }
  return r;
}

}  // namespace gdrbench
