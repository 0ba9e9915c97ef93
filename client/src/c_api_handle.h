// What the C ABI's sources (c_api.cc, c_api_cluster.cc) share: the table of live handles (what
// a C caller holds is an id in it, never an object's address, so a released or made-up handle
// is refused instead of dereferenced), each thread's failure messages, the guard that keeps C++
// exceptions inside the library, checked pointer and size arithmetic, and the conversions of
// options, messages and JSON answers into what C callers get.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdrstore/client.h"
#include "gdrstore/gdrstore.h"

namespace gdr::capi {

enum class Kind { kClient, kBuffer, kStream, kCluster, kClusterBuffer };

// "client", "buffer", "stream", "cluster", "cluster buffer".
const char* KindName(Kind kind);

// The handle value a caller holds: an id that is never reused (so a stale handle cannot name a
// newer object), shown in hex in messages.
using HandleId = uintptr_t;
inline HandleId IdOf(const void* handle) { return reinterpret_cast<HandleId>(handle); }

// Records `s` as the calling thread's last failure on handle `id` (gdrstore_error's answer
// there) and returns its code. Messages are per thread so that a caller reading gdrstore_error
// right after a failing call gets that call's message, whatever other threads do on the handle.
gdrstore_status RecordFailure(HandleId id, const absl::Status& s);
// The calling thread's last failure message on `id`, or nullptr when it has none (it keeps the
// most recent few handles' messages). Valid until this thread's next failure on a handle.
const char* FailureMessage(HandleId id);

// The base of every handle object. Thread-safe: nothing in it changes after Register.
struct CHandle {
  explicit CHandle(Kind k) : kind(k) {}
  virtual ~CHandle() = default;
  CHandle(const CHandle&) = delete;
  CHandle& operator=(const CHandle&) = delete;

  const Kind kind;
  HandleId id = 0;  // set once by Register

  gdrstore_status Fail(const absl::Status& s) const { return RecordFailure(id, s); }
  gdrstore_status Done(const absl::Status& s) const { return s.ok() ? GDRSTORE_OK : Fail(s); }
};

// Enters `h` into the table of live handles and returns the value the caller gets.
HandleId Register(std::shared_ptr<CHandle> h);

// The live handle `handle` of kind `kind`. INVALID_ARGUMENT naming it (`what` says which
// argument) when it is NULL, was released, was never returned by this library, or is of
// another kind. The shared_ptr keeps the object alive for the caller's call even if another
// thread releases the handle meanwhile.
absl::StatusOr<std::shared_ptr<CHandle>> Find(const void* handle, Kind kind, const char* what);

// Whether `handle` is in the table (of any kind).
bool IsLive(const void* handle);

// Takes `handle` out of the table (later calls with it are refused); the object goes when the
// last call using it returns. nullptr (and the reason recorded as this thread's failure on
// the handle) when it is not a live handle of that kind: releasing twice is harmless.
std::shared_ptr<CHandle> Unregister(const void* handle, Kind kind);

// Find for a handle type T (a CHandle with `static constexpr Kind kKind`).
template <typename T>
absl::StatusOr<std::shared_ptr<T>> FindAs(const void* handle, const char* what) {
  absl::StatusOr<std::shared_ptr<CHandle>> h = Find(handle, T::kKind, what);
  if (!h.ok()) return h.status();
  return std::static_pointer_cast<T>(*std::move(h));
}

// The handle a call is made on: the object, or nullptr with the reason recorded as this
// thread's failure on `handle` (the caller returns GDRSTORE_INVALID_ARGUMENT).
template <typename T>
std::shared_ptr<T> Self(const void* handle) {
  absl::StatusOr<std::shared_ptr<T>> h = FindAs<T>(handle, KindName(T::kKind));
  if (!h.ok()) {
    RecordFailure(IdOf(handle), h.status());
    return nullptr;
  }
  return *std::move(h);
}

template <typename T>
std::shared_ptr<T> Unregister(const void* handle) {
  return std::static_pointer_cast<T>(Unregister(handle, T::kKind));
}

// The handle value for a registered object of type T's C type (gdrstore_client*, ...).
template <typename CType>
CType* AsC(HandleId id) {
  return reinterpret_cast<CType*>(id);
}

inline gdrstore_status Invalid(const CHandle& h, const std::string& what) {
  return h.Fail(absl::InvalidArgumentError(what));
}

// Runs `f` (which returns gdrstore_status), turning an escaping exception into INTERNAL.
template <typename F>
gdrstore_status Guard(const CHandle& h, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return h.Fail(absl::InternalError(std::string("unexpected C++ exception: ") + e.what()));
  } catch (...) {
    return h.Fail(absl::InternalError("unexpected C++ exception"));
  }
}

// OK when the caller's memory [p, p + n) is a usable pointer range: p not NULL unless n is 0,
// and p + n not past the end of the address space. INVALID_ARGUMENT naming `what` otherwise.
absl::Status CheckMemory(const void* p, size_t n, const char* what);
// The same for a range of device (or other) addresses: nonzero and not wrapping.
absl::Status CheckAddressRange(uint64_t address, uint64_t n, const char* what);
// OK when [offset, offset + n) of a 64-bit space does not wrap (store offsets, pattern offsets).
absl::Status CheckExtent(uint64_t offset, uint64_t n, const char* what);

// Copies the message of `s` into the caller's `out` (NUL-terminated, truncated to `len`).
void CopyMessage(const absl::Status& s, char* out, size_t len);
// `text` into out[len], truncated, NUL-terminated.
void CopyText(absl::string_view text, char* out, size_t len);

// `text` in memory the caller frees with gdrstore_free; RESOURCE_EXHAUSTED on h otherwise.
gdrstore_status MallocString(const CHandle& h, const std::string& text, char** out);

// Proto3 JSON of `m` with proto field names.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& m);

// Which connection fields a NULL leaves to the environment (gdrstore::ApplyClientEnvironment).
enum class EnvironmentUse {
  kClient,  // agent, daemon address and token: a client of one daemon or of the agent
  kClusterMember,  // the token only: a cluster reaches each member at its own address, directly
};

// The C options as the C++ library's. Fields past o->struct_size are never read: they are not
// the caller's memory. A connection field left NULL takes the environment's value (`use` says
// which ones); a non-NULL one, even "", is the caller's. INVALID_ARGUMENT naming what is wrong
// (a missing or too old struct, an unknown transport, a malformed variable); a token file's
// errors as it reports them.
absl::StatusOr<gdrstore::ClientOptions> ClientOptionsFromC(const gdrstore_client_options* o,
                                                           EnvironmentUse use);

}  // namespace gdr::capi
