// Ownership of libibverbs objects: every ibv_* object the project creates lives in a
// std::unique_ptr whose deleter destroys it and logs (never throws, never aborts) when the
// destroy fails, e.g. a PD that still has MRs. mlx5dv objects are ibv_qp too and use the same.
#pragma once

#include <infiniband/verbs.h>

#include <memory>

namespace gdr::verbs {

struct VerbsDeleter {
  void operator()(ibv_context* p) const;
  void operator()(ibv_pd* p) const;
  void operator()(ibv_comp_channel* p) const;
  void operator()(ibv_cq* p) const;
  void operator()(ibv_qp* p) const;
  void operator()(ibv_mr* p) const;
  void operator()(ibv_ah* p) const;
  void operator()(ibv_device** p) const;  // a device list from ibv_get_device_list
};

template <typename T>
using VerbsPtr = std::unique_ptr<T, VerbsDeleter>;

}  // namespace gdr::verbs
