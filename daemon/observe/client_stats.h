// Op accounting per client identity: who a caller is for the counters (its
// credential's label when tokens are on, else its IP address without the port),
// bounded so that a flood of new addresses cannot grow the daemon's memory or a
// metrics scrape without limit.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/observe/stats.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

// The identity an op is counted under: `label` (the caller's credential) when
// not empty; else the IP address of gRPC's `peer` text without its port ("unix"
// for a unix socket, "unknown" for text that does not parse, such as an
// in-process channel).
std::string ClientIdentity(absl::string_view label, absl::string_view peer);

class ClientStats {
 public:
  // Identities tracked one by one; later ones share kOther.
  static constexpr size_t kMaxClients = 64;
  // Holds no label ([A-Za-z0-9_.@:/-]) and no address can be it.
  static constexpr absl::string_view kOther = "~other";

  // The counters of `identity`: its own among the first kMaxClients identities
  // seen, else kOther's. Never null; valid for this object's life. Thread-safe.
  OpCounters* Resolve(absl::string_view identity);
  // One entry per identity with its counters, in name order, kOther last when
  // used.
  void Fill(google::protobuf::RepeatedPtrField<gdrstore::v1::ClientStats>* out) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<OpCounters>, std::less<>> clients_ ABSL_GUARDED_BY(mu_);
  OpCounters other_;
  std::atomic<bool> other_used_{false};
};

}  // namespace gdr
