#include "common/topo/numa_cpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdr::topo {

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  // A CPU number this high is a corrupt file, not a machine: cap it before expanding ranges.
  constexpr int kMaxCpu = 1 << 16;
  for (absl::string_view piece : absl::StrSplit(absl::StripAsciiWhitespace(text), ',',
                                                absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    const size_t dash = piece.find('-');
    const absl::string_view low = piece.substr(0, dash);
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(low, &lo) || lo < 0 || lo > kMaxCpu) {
      return absl::InvalidArgumentError(absl::StrCat("cpu list piece '", piece, "' is not a CPU"));
    }
    hi = lo;
    if (dash != absl::string_view::npos &&
        (!absl::SimpleAtoi(piece.substr(dash + 1), &hi) || hi < lo || hi > kMaxCpu)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu list piece '", piece, "' is not a low-high range"));
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", sorted[i]);
    if (j > i) absl::StrAppend(&out, "-", sorted[j]);
    i = j + 1;
  }
  return out;
}

absl::StatusOr<std::vector<int>> NumaNodeCpus(const std::string& sysfs_root, int node) {
  const std::string path =
      absl::StrCat(sysfs_root, "/devices/system/node/node", node, "/cpulist");
  std::ifstream in(path);
  if (node < 0 || !in) return absl::NotFoundError(absl::StrCat("no ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text.str());
  if (!cpus.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", cpus.status().message()));
  }
  return cpus;
}

}  // namespace gdr::topo
