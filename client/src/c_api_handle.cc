// The helpers every C ABI source uses (c_api_handle.h).
#include "client/src/c_api_handle.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "common/wire/token_file.h"
#include "gdrstore/client_environment.h"

namespace gdr::capi {
namespace {

// The live handles. Ids count up from 1 and are never reused, so a handle kept after its
// release (or a copy of it) stays dead even once the allocator hands its memory to a new object.
class HandleTable {
 public:
  HandleId Add(std::shared_ptr<CHandle> h) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const HandleId id = next_++;
    h->id = id;
    live_.emplace(id, std::move(h));
    return id;
  }
  std::shared_ptr<CHandle> Get(HandleId id) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : it->second;
  }
  // Takes the entry out only when it is of `kind`; the entry (or nullptr) either way.
  std::shared_ptr<CHandle> Take(HandleId id, Kind kind) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return nullptr;
    std::shared_ptr<CHandle> h = it->second;
    if (h->kind == kind) live_.erase(it);
    return h;
  }

 private:
  mutable absl::Mutex mu_;
  HandleId next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<HandleId, std::shared_ptr<CHandle>> live_ ABSL_GUARDED_BY(mu_);
};

// Never destroyed: handles may be closed from atexit handlers or thread exits after static
// destructors ran.
HandleTable& Table() {
  static HandleTable* const table = new HandleTable();
  return *table;
}

// A thread's failure messages on the last few handles it failed on, like errno but per handle.
// Bounded so that a thread failing on many short-lived handles does not grow without end.
struct FailureSlot {
  HandleId id = 0;
  bool used = false;
  std::string message;
};
constexpr size_t kFailureSlots = 16;
thread_local std::array<FailureSlot, kFailureSlots> t_failures;
thread_local size_t t_next_slot = 0;

// How each connection option's C value becomes its ClientOptions member (connection_options.h's
// from_c column); a NULL string or a zero number leaves the member's default.
absl::Status FromTEXT(const char*, const char* v, std::string* out) {
  if (v != nullptr) *out = v;
  return absl::OkStatus();
}
absl::Status FromTRANSPORT(const char* field, const char* v, gdrstore::Transport* out) {
  if (v == nullptr) return absl::OkStatus();
  std::optional<gdrstore::Transport> t = gdrstore::ParseTransport(v);
  if (!t) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", v, "' is not one of tcp, rc, dc, local, auto"));
  }
  *out = *t;
  return absl::OkStatus();
}
absl::Status FromTOKEN_FILE(const char*, const char* v, std::string* token) {
  if (v == nullptr || v[0] == '\0') return absl::OkStatus();
  absl::StatusOr<std::string> read = gdr::ReadClientToken(v);
  if (!read.ok()) return read.status();
  *token = *std::move(read);
  return absl::OkStatus();
}
absl::Status FromMILLIS(const char*, uint32_t v, std::chrono::milliseconds* out) {
  *out = std::chrono::milliseconds(v);  // 0: no deadline, as ClientOptions takes it
  return absl::OkStatus();
}
absl::Status FromFLAG(const char*, uint32_t v, bool* out) {
  *out = v != 0;
  return absl::OkStatus();
}
absl::Status FromCOUNT(const char*, uint32_t v, uint32_t* out) {
  if (v != 0) *out = v;  // its range is Client::Connect's to check, naming the member
  return absl::OkStatus();
}

// The layout of the first release (ABI 1) with the fields appended since, as callers were
// built against it: the list in connection_options.h may only grow at its end.
struct ReleasedClientOptions {
  size_t struct_size;
  const char *daemon_address, *transport, *token, *token_file, *rdma_device;
  uint32_t rpc_timeout_ms;
  const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
  uint32_t crc32c, fail_when_full;
  const char *agent, *local_socket, *require;
  uint32_t stream_calls;
};
#define GDR_SAME_OFFSET(field)                                              \
  static_assert(offsetof(gdrstore_client_options, field) ==                 \
                    offsetof(ReleasedClientOptions, field),                 \
                "gdrstore_client_options." #field " moved: append options only")
GDR_SAME_OFFSET(daemon_address);
GDR_SAME_OFFSET(transport);
GDR_SAME_OFFSET(token);
GDR_SAME_OFFSET(token_file);
GDR_SAME_OFFSET(rdma_device);
GDR_SAME_OFFSET(rpc_timeout_ms);
GDR_SAME_OFFSET(tls_ca);
GDR_SAME_OFFSET(tls_cert);
GDR_SAME_OFFSET(tls_key);
GDR_SAME_OFFSET(tls_server_name);
GDR_SAME_OFFSET(crc32c);
GDR_SAME_OFFSET(fail_when_full);
GDR_SAME_OFFSET(agent);
GDR_SAME_OFFSET(local_socket);
GDR_SAME_OFFSET(require);
GDR_SAME_OFFSET(stream_calls);
#undef GDR_SAME_OFFSET

absl::Status NotLive(const void* handle, const char* what) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s handle %#x is not a live handle (released already, or never returned by this "
      "library)",
      what, IdOf(handle)));
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kClient:
      return "client";
    case Kind::kBuffer:
      return "buffer";
    case Kind::kStream:
      return "stream";
    case Kind::kCluster:
      return "cluster";
    case Kind::kClusterBuffer:
      return "cluster buffer";
  }
  return "handle";
}

gdrstore_status RecordFailure(HandleId id, const absl::Status& s) {
  FailureSlot* slot = nullptr;
  for (FailureSlot& f : t_failures) {
    if (f.used && f.id == id) slot = &f;
  }
  if (slot == nullptr) {
    slot = &t_failures[t_next_slot];
    t_next_slot = (t_next_slot + 1) % kFailureSlots;
  }
  slot->id = id;
  slot->used = true;
  slot->message = std::string(s.message());
  return s.ok() ? GDRSTORE_UNKNOWN : static_cast<gdrstore_status>(s.code());
}

const char* FailureMessage(HandleId id) {
  for (const FailureSlot& f : t_failures) {
    if (f.used && f.id == id) return f.message.c_str();
  }
  return nullptr;
}

HandleId Register(std::shared_ptr<CHandle> h) { return Table().Add(std::move(h)); }

absl::StatusOr<std::shared_ptr<CHandle>> Find(const void* handle, Kind kind, const char* what) {
  if (handle == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " handle is NULL"));
  }
  std::shared_ptr<CHandle> h = Table().Get(IdOf(handle));
  if (h == nullptr) return NotLive(handle, what);
  if (h->kind != kind) {
    return absl::InvalidArgumentError(absl::StrFormat("handle %#x is a %s, not a %s",
                                                      IdOf(handle), KindName(h->kind), what));
  }
  return h;
}

bool IsLive(const void* handle) {
  return handle != nullptr && Table().Get(IdOf(handle)) != nullptr;
}

std::shared_ptr<CHandle> Unregister(const void* handle, Kind kind) {
  if (handle == nullptr) return nullptr;  // like free(NULL)
  std::shared_ptr<CHandle> h = Table().Take(IdOf(handle), kind);
  if (h == nullptr) {
    RecordFailure(IdOf(handle), NotLive(handle, KindName(kind)));
    return nullptr;
  }
  if (h->kind != kind) {
    RecordFailure(IdOf(handle), absl::InvalidArgumentError(absl::StrFormat(
                                    "handle %#x is a %s, not a %s: not released", IdOf(handle),
                                    KindName(h->kind), KindName(kind))));
    return nullptr;
  }
  return h;
}

absl::Status CheckMemory(const void* p, size_t n, const char* what) {
  if (n == 0) return absl::OkStatus();
  if (p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is NULL with a size of ", n,
                                                   " bytes"));
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  if (n - 1 > UINTPTR_MAX - begin) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %p (+%u bytes) runs past the end of the address space", what, p, n));
  }
  return absl::OkStatus();
}

absl::Status CheckAddressRange(uint64_t address, uint64_t n, const char* what) {
  if (address == 0) return absl::InvalidArgumentError(absl::StrCat(what, " is 0"));
  if (n > 0 && n - 1 > UINT64_MAX - address) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %#x (+%u bytes) runs past the end of the address space", what, address, n));
  }
  return absl::OkStatus();
}

absl::Status CheckExtent(uint64_t offset, uint64_t n, const char* what) {
  if (n > 0 && n - 1 > UINT64_MAX - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " [", offset, ", +", n, ") runs past 2^64"));
  }
  return absl::OkStatus();
}

void CopyText(absl::string_view text, char* out, size_t len) {
  if (out == nullptr || len == 0) return;
  const size_t n = std::min(len - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

void CopyMessage(const absl::Status& s, char* out, size_t len) { CopyText(s.message(), out, len); }

gdrstore_status MallocString(const CHandle& h, const std::string& text, char** out) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p == nullptr) return h.Fail(absl::ResourceExhaustedError("out of memory"));
  std::memcpy(p, text.c_str(), text.size() + 1);
  *out = p;
  return GDRSTORE_OK;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& m) {
  std::string text;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(m, &text, opts).ok()) {
    return absl::InternalError(absl::StrCat("cannot render a ", m.GetTypeName(), " as JSON"));
  }
  return text;
}

absl::StatusOr<gdrstore::ClientOptions> ClientOptionsFromC(const gdrstore_client_options* o,
                                                           EnvironmentUse use) {
  // The options as the first header had them; later fields are read where struct_size has them.
  constexpr size_t kFirstOptionsSize =
      offsetof(gdrstore_client_options, rpc_timeout_ms) + sizeof(uint32_t);
  if (o == nullptr || o->struct_size < kFirstOptionsSize) {
    return absl::InvalidArgumentError(
        "options missing or from an older header (call gdrstore_client_options_init)");
  }
  gdrstore::ClientOptions opts;
  // Every option of connection_options.h's list that struct_size covers, converted as the list
  // says (later fields absent from an older caller's struct keep their defaults).
#define GDR_TAKE_OPTION(field, c_type, from_c, member, ...)                                  \
  if (o->struct_size >= offsetof(gdrstore_client_options, field) + sizeof(c_type)) {       \
    GDR_RETURN_IF_ERROR(From##from_c(#field, o->field, &opts.member));                    \
  }
  GDRSTORE_CONNECTION_OPTIONS(GDR_TAKE_OPTION)
#undef GDR_TAKE_OPTION
  const bool cluster = use == EnvironmentUse::kClusterMember;
  gdrstore::ExplicitOptions given;
  given.agent = cluster || (o->struct_size >= offsetof(gdrstore_client_options, agent) +
                                                  sizeof(const char*) &&
                            o->agent != nullptr);
  given.daemon_address = cluster || o->daemon_address != nullptr;
  given.token = o->token != nullptr || o->token_file != nullptr;
  GDR_RETURN_IF_ERROR(gdrstore::ApplyClientEnvironment(given, &opts));
  return opts;
}

}  // namespace gdr::capi
