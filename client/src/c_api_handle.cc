// The helpers every C ABI source uses (c_api_handle.h).
#include "client/src/c_api_handle.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/token_file.h"

namespace gdr::capi {

void CopyMessage(const absl::Status& s, char* out, size_t len) {
  if (out == nullptr || len == 0) return;
  const std::string msg(s.message());
  const size_t n = std::min(len - 1, msg.size());
  std::memcpy(out, msg.data(), n);
  out[n] = '\0';
}

gdrstore_status MallocString(CHandle* h, const std::string& text, char** out) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (p == nullptr) return h->Fail(absl::ResourceExhaustedError("out of memory"));
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

absl::StatusOr<gdrstore::ClientOptions> ClientOptionsFromC(const gdrstore_client_options* o) {
  // The options as the first header had them; later fields are read where struct_size has them.
  constexpr size_t kFirstOptionsSize =
      offsetof(gdrstore_client_options, rpc_timeout_ms) + sizeof(uint32_t);
  if (o == nullptr || o->struct_size < kFirstOptionsSize) {
    return absl::InvalidArgumentError(
        "options missing or from an older header (call gdrstore_client_options_init)");
  }
  gdrstore::ClientOptions opts;
  if (o->daemon_address != nullptr) opts.daemon_address = o->daemon_address;
  if (o->transport != nullptr) {
    std::optional<gdrstore::Transport> t = gdrstore::ParseTransport(o->transport);
    if (!t) {
      return absl::InvalidArgumentError(
          absl::StrCat("transport '", o->transport, "' is not one of tcp, rc, dc, auto"));
    }
    opts.transport = *t;
  }
  if (o->token != nullptr) opts.token = o->token;
  if (o->token_file != nullptr && o->token_file[0] != '\0') {
    absl::StatusOr<std::string> token = gdr::ReadClientToken(o->token_file);
    if (!token.ok()) return token.status();
    opts.token = *std::move(token);
  }
  if (o->rdma_device != nullptr) opts.rdma_device = o->rdma_device;
  opts.rpc_timeout = std::chrono::milliseconds(o->rpc_timeout_ms);
  auto take = [o](size_t offset, const char* const gdrstore_client_options::*field,
                  std::string* into) {
    if (o->struct_size < offset + sizeof(const char*)) return;
    if (const char* v = o->*field; v != nullptr) *into = v;
  };
  take(offsetof(gdrstore_client_options, tls_ca), &gdrstore_client_options::tls_ca, &opts.tls_ca);
  take(offsetof(gdrstore_client_options, tls_cert), &gdrstore_client_options::tls_cert,
       &opts.tls_cert);
  take(offsetof(gdrstore_client_options, tls_key), &gdrstore_client_options::tls_key,
       &opts.tls_key);
  take(offsetof(gdrstore_client_options, tls_server_name),
       &gdrstore_client_options::tls_server_name, &opts.tls_server_name);
  if (o->struct_size >= offsetof(gdrstore_client_options, crc32c) + sizeof(uint32_t)) {
    opts.crc32c = o->crc32c != 0;
  }
  return opts;
}

}  // namespace gdr::capi
