// The path an op's bytes took, named on every result (OpResult::path), and the caller's
// requirement on it (ClientOptions::require), so that nothing falls back silently.
//
// A path is one or more hops joined by '>', the first the client's own:
//   HOP  = TRANSPORT [":" DEVICE ("+" DEVICE)*] "/" WAY
//   TRANSPORT: tcp, rc, dc, local, agent
//   WAY: how the hop reaches the op's memory: host; for GPU memory dma-buf, peermem (the NIC
//        registered it), staged (copied through pinned host memory), cuda-ipc, vmm-fd (handed
//        over as a CUDA IPC handle or a VMM descriptor).
// e.g. "rc:mlx5_0/dma-buf", "tcp/staged", "agent/cuda-ipc>rc:mlx5_0+mlx5_1/dma-buf".
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr {

struct Region;

// The client's hop to `region` over `transport` on `device` (empty: none named).
std::string Hop(absl::string_view transport, absl::string_view device, const Region& region);

// `hop` followed by what the server says lies beyond it (OpResponse.path; empty: nothing).
std::string JoinPath(absl::string_view hop, absl::string_view beyond);

// One path for an op sent in slices: equal paths stay one, paths that differ only in their
// first hop's device list join those lists ("rc:a/x" + "rc:b/x" = "rc:a+b/x"), others join with
// " | ".
std::string MergePaths(absl::string_view a, absl::string_view b);

// ClientOptions::require: comma-separated terms, each of which every op's path must satisfy.
//   tcp, rc, dc, local: some hop is over that transport;
//   agent / direct: the op goes through the node agent / does not;
//   dma-buf, peermem, staged, cuda-ipc, vmm-fd: GPU memory is reached that way on some hop
//   (host memory is not constrained by these).
struct Requirement {
  std::vector<std::string> terms;
  std::string text;  // as given, for messages
  bool empty() const { return terms.empty(); }
};
// INVALID_ARGUMENT naming an unknown term and listing the known ones.
absl::StatusOr<Requirement> ParseRequirement(absl::string_view text);

// OK when `path` satisfies every term; FAILED_PRECONDITION naming the path and the term when
// not. `gpu`: the op's memory is GPU memory. `complete`: the path is all there is (false while
// later hops are not known yet: only terms the known hops refute fail). `why`, when not empty,
// is appended: what made the choice (auto's notes, a registration's fallback).
absl::Status CheckPath(const Requirement& required, absl::string_view path, bool gpu,
                       bool complete, absl::string_view why = "");

}  // namespace gdr
