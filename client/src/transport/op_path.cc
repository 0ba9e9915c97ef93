#include "client/src/transport/op_path.h"

#include <algorithm>
#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/src/transport/region.h"

namespace gdr {

namespace {

constexpr std::array<absl::string_view, 4> kTransports = {"tcp", "rc", "dc", "local"};
constexpr std::array<absl::string_view, 5> kGpuWays = {"dma-buf", "peermem", "staged",
                                                       "cuda-ipc", "vmm-fd"};

template <size_t N>
bool OneOf(const std::array<absl::string_view, N>& set, absl::string_view s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

struct ParsedHop {
  absl::string_view transport, devices, way;
};

ParsedHop Parse(absl::string_view hop) {
  ParsedHop p;
  std::pair<absl::string_view, absl::string_view> tw = absl::StrSplit(hop, absl::MaxSplits('/', 1));
  p.way = tw.second;
  std::pair<absl::string_view, absl::string_view> td =
      absl::StrSplit(tw.first, absl::MaxSplits(':', 1));
  p.transport = td.first;
  p.devices = td.second;
  return p;
}

std::vector<ParsedHop> Hops(absl::string_view path) {
  std::vector<ParsedHop> hops;
  // A merged path ("a | b", slices that went different ways) is judged on all its hops at once.
  for (absl::string_view h : absl::StrSplit(path, absl::ByAnyChar(">|"), absl::SkipWhitespace())) {
    hops.push_back(Parse(absl::StripAsciiWhitespace(h)));
  }
  return hops;
}

}  // namespace

std::string Hop(absl::string_view transport, absl::string_view device, const Region& region) {
  const absl::string_view way = region.gpu == nullptr ? "host" : absl::string_view(region.gpu_way);
  return absl::StrCat(transport, device.empty() ? "" : ":", device, "/", way);
}

std::string JoinPath(absl::string_view hop, absl::string_view beyond) {
  if (beyond.empty()) return std::string(hop);
  if (hop.empty()) return std::string(beyond);
  return absl::StrCat(hop, ">", beyond);
}

std::string MergePaths(absl::string_view a, absl::string_view b) {
  if (a.empty() || a == b) return std::string(b);
  if (b.empty()) return std::string(a);
  // Same first hop but for its devices, same rest: one hop over both device lists.
  const size_t a_end = a.find('>'), b_end = b.find('>');
  const absl::string_view a_rest = a_end == absl::string_view::npos ? "" : a.substr(a_end);
  const absl::string_view b_rest = b_end == absl::string_view::npos ? "" : b.substr(b_end);
  const ParsedHop x = Parse(a.substr(0, a_end)), y = Parse(b.substr(0, b_end));
  if (a.find('|') == absl::string_view::npos && b.find('|') == absl::string_view::npos &&
      a_rest == b_rest && x.transport == y.transport && x.way == y.way) {
    std::vector<absl::string_view> devices = absl::StrSplit(x.devices, '+', absl::SkipEmpty());
    for (absl::string_view d : absl::StrSplit(y.devices, '+', absl::SkipEmpty())) {
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
    }
    return absl::StrCat(x.transport, devices.empty() ? "" : ":", absl::StrJoin(devices, "+"), "/",
                        x.way, a_rest);
  }
  return absl::StrCat(a, " | ", b);
}

absl::StatusOr<Requirement> ParseRequirement(absl::string_view text) {
  Requirement r;
  r.text = std::string(text);
  for (absl::string_view t : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    t = absl::StripAsciiWhitespace(t);
    if (!OneOf(kTransports, t) && !OneOf(kGpuWays, t) && t != "agent" && t != "direct") {
      return absl::InvalidArgumentError(absl::StrCat(
          "require: unknown term \"", absl::CHexEscape(t), "\" (known: ",
          absl::StrJoin(kTransports, ", "), ", agent, direct, ", absl::StrJoin(kGpuWays, ", "),
          ")"));
    }
    if (std::find(r.terms.begin(), r.terms.end(), t) == r.terms.end()) r.terms.emplace_back(t);
  }
  const bool agent = std::find(r.terms.begin(), r.terms.end(), "agent") != r.terms.end();
  const bool direct = std::find(r.terms.begin(), r.terms.end(), "direct") != r.terms.end();
  if (agent && direct) {
    return absl::InvalidArgumentError("require: agent and direct rule each other out");
  }
  return r;
}

absl::Status CheckPath(const Requirement& required, absl::string_view path, bool gpu,
                       bool complete, absl::string_view why) {
  const std::vector<ParsedHop> hops = Hops(path);
  const bool through_agent =
      std::any_of(hops.begin(), hops.end(), [](const ParsedHop& h) { return h.transport == "agent"; });
  for (const std::string& term : required.terms) {
    bool met = false;
    bool decided = complete;
    if (term == "agent" || term == "direct") {
      met = (term == "agent") == through_agent;
      decided = true;  // the first hop says it
    } else if (OneOf(kGpuWays, term)) {
      if (!gpu) continue;
      met = std::any_of(hops.begin(), hops.end(), [&](const ParsedHop& h) { return h.way == term; });
    } else {
      met = std::any_of(hops.begin(), hops.end(),
                        [&](const ParsedHop& h) { return h.transport == term; });
    }
    if (!met && decided) {
      return absl::FailedPreconditionError(absl::StrCat(
          "require=", required.text, ": the path is ", path, ", not ", term,
          why.empty() ? "" : " (", why, why.empty() ? "" : ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gdr
