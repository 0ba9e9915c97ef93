// Fuzzes the handoff protocol's parser (common/wire/handoff_message.h) the way a server or
// client reads a packet off its Unix socket: byte 0 (mod 3) is how many descriptors came with
// it, the rest is the packet.
//
// Properties: a packet Decode accepts is at most kMaxMessageBytes, carries exactly the
// descriptors its type takes, re-encodes to exactly the bytes it came from (every byte is in
// the struct, so nothing a peer sends is silently ignored), names its request id the way
// RequestIdOf reads it, and holds what the header promises (nonzero size, session and rkeys;
// no address or offset wrap; GPU ranges inside their allocation; a real status code; chunks of
// nonzero size, staged counts within the limit).
// A refused packet is INVALID_ARGUMENT with a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "absl/strings/string_view.h"
#include "common/wire/handoff_message.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace h = gdr::handoff;

void CheckRegister(const h::Register& r) {
  GDR_FUZZ_CHECK(r.size > 0);
  GDR_FUZZ_CHECK(r.address + r.size >= r.address);
  GDR_FUZZ_CHECK(r.offset + r.size >= r.offset);
  GDR_FUZZ_CHECK(r.gpu.size() <= 32);
  if (r.kind == h::MemoryKind::kHostMemfd) {
    GDR_FUZZ_CHECK(r.allocation_size == 0 && r.gpu.empty());
  } else {
    GDR_FUZZ_CHECK(r.kind == h::MemoryKind::kGpuIpc || r.kind == h::MemoryKind::kGpuVmmFd ||
                   r.kind == h::MemoryKind::kGpuVmmChunks);
    GDR_FUZZ_CHECK(!r.gpu.empty());
    GDR_FUZZ_CHECK(r.offset + r.size <= r.allocation_size);
  }
  GDR_FUZZ_CHECK(std::string(h::MemoryKindName(r.kind)) != "unknown");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t fds = data[0] % 3;
  const absl::string_view packet(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<h::Message> m = h::Decode(packet, fds);
  if (!m.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(m.status()));
    GDR_FUZZ_CHECK(!m.status().message().empty());
    return 0;
  }
  GDR_FUZZ_CHECK(packet.size() <= h::kMaxMessageBytes);
  GDR_FUZZ_CHECK(h::FdsFor(m->body) == fds);
  GDR_FUZZ_CHECK(h::Encode(*m) == packet);
  GDR_FUZZ_CHECK(h::RequestIdOf(packet) == m->request_id);
  GDR_FUZZ_CHECK(std::string(h::MessageTypeName(h::TypeOf(m->body))) != "UNKNOWN");
  if (const auto* r = std::get_if<h::Register>(&m->body)) CheckRegister(*r);
  if (const auto* ok = std::get_if<h::HelloOk>(&m->body)) {
    GDR_FUZZ_CHECK(ok->session != 0 && ok->server.size() <= h::kMaxNameBytes);
  }
  if (const auto* hello = std::get_if<h::Hello>(&m->body)) {
    GDR_FUZZ_CHECK(hello->name.size() <= h::kMaxNameBytes);
  }
  if (const auto* r = std::get_if<h::Registered>(&m->body)) GDR_FUZZ_CHECK(r->rkey != 0);
  if (const auto* d = std::get_if<h::Deregister>(&m->body)) GDR_FUZZ_CHECK(d->rkey != 0);
  if (const auto* c = std::get_if<h::RegisterChunk>(&m->body)) GDR_FUZZ_CHECK(c->size != 0);
  if (const auto* c = std::get_if<h::ChunkStaged>(&m->body)) {
    GDR_FUZZ_CHECK(c->staged >= 1 && c->staged <= h::kMaxChunks);
  }
  if (const auto* e = std::get_if<h::Error>(&m->body)) {
    GDR_FUZZ_CHECK(e->code >= 1 && e->code <= 16 && e->message.size() <= h::kMaxErrorBytes);
  }
  // The same packet with another descriptor count is refused (each type takes one count).
  GDR_FUZZ_CHECK(!h::Decode(packet, fds + 1).ok());
  return 0;
}
