// Bearer-token admission of gdrstore.v1 calls: every call must carry the metadata
// `authorization: Bearer <token>` with one of the accepted tokens. Off (every call admitted)
// while no token is set. The gRPC health and reflection services are not checked: probes and
// schema discovery need no secret. Tokens change live (SIGHUP) without dropping calls.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace gdr {

class TokenAuth {
 public:
  // Replaces the accepted tokens; an empty list turns the check off. Thread-safe.
  void Set(std::vector<std::string> tokens);
  bool enabled() const { return enabled_.load(std::memory_order_acquire); }
  // One accepted token (empty when off), for the daemon's own calls to itself (the watchdog's
  // in-process Ping).
  std::string AnyToken() const;

  // OK when the check is off or the call presents an accepted token; UNAUTHENTICATED when it
  // presents none (no `authorization` metadata, or not a Bearer one); PERMISSION_DENIED when
  // its token is not accepted. Messages never quote a token.
  absl::Status Check(const grpc::CallbackServerContext& ctx) const;

  // The rule itself, on one metadata value (nullptr: none was sent).
  static absl::Status CheckValue(const std::vector<std::string>& accepted,
                                 const std::string* authorization);

 private:
  std::atomic<bool> enabled_{false};
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<std::string>> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr
