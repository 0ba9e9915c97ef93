// What the C ABI's sources (c_api.cc, c_api_cluster.cc) share: the base of every handle with
// the message of its last failure, the guard that keeps C++ exceptions inside the library, and
// the conversions of options, messages and JSON answers into what C callers get.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gdrstore/client.h"
#include "gdrstore/gdrstore.h"

namespace gdr::capi {

// What every handle starts with (and nothing before it: gdrstore_error casts the handle's
// address to it): the message of its last failure.
struct CHandle {
  mutable absl::Mutex mu;
  std::string error ABSL_GUARDED_BY(mu);
  gdrstore_status Fail(const absl::Status& s) {
    absl::MutexLock lock(&mu);
    error = std::string(s.message());
    return static_cast<gdrstore_status>(s.code());
  }
  gdrstore_status Done(const absl::Status& s) { return s.ok() ? GDRSTORE_OK : Fail(s); }
};

inline gdrstore_status Invalid(CHandle* h, const char* what) {
  return h->Fail(absl::InvalidArgumentError(what));
}

// Runs `f` (which returns gdrstore_status), turning an escaping exception into INTERNAL.
template <typename F>
gdrstore_status Guard(CHandle* h, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return h->Fail(absl::InternalError(std::string("unexpected C++ exception: ") + e.what()));
  } catch (...) {
    return h->Fail(absl::InternalError("unexpected C++ exception"));
  }
}

// Copies the message of `s` into the caller's `out` (NUL-terminated, truncated to `len`).
void CopyMessage(const absl::Status& s, char* out, size_t len);

// `text` in memory the caller frees with gdrstore_free; RESOURCE_EXHAUSTED on h otherwise.
gdrstore_status MallocString(CHandle* h, const std::string& text, char** out);

// Proto3 JSON of `m` with proto field names.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& m);

// The C options as the C++ library's. Fields past o->struct_size are never read: they are not
// the caller's memory. INVALID_ARGUMENT naming what is wrong (a missing or too old struct, an
// unknown transport); a token file's errors as it reports them.
absl::StatusOr<gdrstore::ClientOptions> ClientOptionsFromC(const gdrstore_client_options* o);

}  // namespace gdr::capi
