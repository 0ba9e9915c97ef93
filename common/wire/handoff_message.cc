#include "common/wire/handoff_message.h"

#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdr::handoff {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "handoff packets are little-endian");

// Header: magic u32, version u16, type u16, request id u32, body bytes u32.
constexpr size_t kHeaderBytes = 16;
constexpr size_t kMaxGpuBytes = 32;
constexpr uint8_t kWritableFlag = 0x01;

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_integral_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  void Bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // u16 length, then at most `limit` bytes of `s`.
  void String(const std::string& s, size_t limit) {
    const size_t n = s.size() < limit ? s.size() : limit;
    Put<uint16_t>(static_cast<uint16_t>(n));
    out_.append(s.data(), n);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads the body; the first failure sticks and names the field it was reading.
class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  template <typename T>
  T Get(const char* field) {
    T v{};
    if (Take(sizeof(T), field)) std::memcpy(&v, in_.data() + pos_ - sizeof(T), sizeof(T));
    return v;
  }
  void Bytes(void* p, size_t n, const char* field) {
    if (Take(n, field)) std::memcpy(p, in_.data() + pos_ - n, n);
  }
  std::string String(size_t limit, const char* field) {
    const uint16_t n = Get<uint16_t>(field);
    if (!status_.ok()) return "";
    if (n > limit) {
      Fail(absl::StrFormat("%s is %u bytes, more than its limit of %u", field, n, limit));
      return "";
    }
    if (!Take(n, field)) return "";
    return std::string(in_.substr(pos_ - n, n));
  }
  void Fail(std::string message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::move(message));
  }
  absl::Status Finish(const char* type) {
    if (status_.ok() && pos_ != in_.size()) {
      Fail(absl::StrFormat("%s carries %u trailing bytes", type, in_.size() - pos_));
    }
    return status_;
  }

 private:
  bool Take(size_t n, const char* field) {
    if (!status_.ok()) return false;
    if (in_.size() - pos_ < n) {
      Fail(absl::StrFormat("%s runs past the end of the message", field));
      return false;
    }
    pos_ += n;
    return true;
  }
  absl::string_view in_;
  size_t pos_ = 0;
  absl::Status status_;
};

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

bool KnownKind(uint8_t k) { return k >= 1 && k <= 4; }
bool KnownType(uint16_t t) { return t >= 1 && t <= 11; }

void EncodeBody(Writer& w, const Body& body) {
  std::visit(Overloaded{
                 [&](const Hello& m) { w.String(m.name, kMaxNameBytes); },
                 [&](const HelloOk& m) {
                   w.Put<uint64_t>(m.session);
                   w.Bytes(m.key.data(), m.key.size());
                   w.String(m.server, kMaxNameBytes);
                 },
                 [&](const Register& m) {
                   w.Put<uint8_t>(static_cast<uint8_t>(m.kind));
                   w.Put<uint8_t>(m.writable ? kWritableFlag : 0);
                   w.Put<uint16_t>(0);  // reserved
                   w.Put<uint64_t>(m.address);
                   w.Put<uint64_t>(m.size);
                   w.Put<uint64_t>(m.offset);
                   w.Put<uint64_t>(m.allocation_size);
                   w.Bytes(m.ipc_handle.data(), m.ipc_handle.size());
                   w.String(m.gpu, kMaxGpuBytes);
                 },
                 [&](const Registered& m) { w.Put<uint32_t>(m.rkey); },
                 [&](const Deregister& m) { w.Put<uint32_t>(m.rkey); },
                 [&](const Error& m) {
                   w.Put<uint32_t>(m.code);
                   w.String(m.message, kMaxErrorBytes);
                 },
                 [&](const RegisterChunk& m) { w.Put<uint64_t>(m.size); },
                 [&](const ChunkStaged& m) { w.Put<uint32_t>(m.staged); },
                 [&](const Deregistered&) {}, [&](const OpenChannel&) {},
                 [&](const ChannelOpen&) {}},
             body);
}

absl::Status CheckRegister(const Register& m) {
  const char* kind = MemoryKindName(m.kind);
  if (m.size == 0) return absl::InvalidArgumentError("REGISTER of 0 bytes (size must be > 0)");
  if (m.address + m.size < m.address) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "REGISTER address 0x%x + size %u wraps around the address space", m.address, m.size));
  }
  if (m.offset + m.size < m.offset) {
    return absl::InvalidArgumentError(
        absl::StrFormat("REGISTER offset %u + size %u overflows", m.offset, m.size));
  }
  if (m.kind == MemoryKind::kHostMemfd) {
    if (m.allocation_size != 0 || !m.gpu.empty()) {
      return absl::InvalidArgumentError(
          "REGISTER of host-memfd memory names a GPU allocation (allocation_size and gpu are "
          "for the GPU kinds)");
    }
    return absl::OkStatus();
  }
  if (m.gpu.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("REGISTER of ", kind, " memory names no GPU (its PCI address)"));
  }
  if (m.offset + m.size > m.allocation_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "REGISTER of %s memory: offset %u + size %u lies past the allocation's %u bytes", kind,
        m.offset, m.size, m.allocation_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<Body> DecodeBody(MessageType type, Reader& r) {
  Body body;
  switch (type) {
    case MessageType::kHello:
      body = Hello{r.String(kMaxNameBytes, "HELLO name")};
      break;
    case MessageType::kHelloOk: {
      HelloOk m;
      m.session = r.Get<uint64_t>("HELLO_OK session");
      r.Bytes(m.key.data(), m.key.size(), "HELLO_OK key");
      m.server = r.String(kMaxNameBytes, "HELLO_OK server");
      body = std::move(m);
      break;
    }
    case MessageType::kRegister: {
      Register m;
      const uint8_t kind = r.Get<uint8_t>("REGISTER kind");
      const uint8_t flags = r.Get<uint8_t>("REGISTER flags");
      const uint16_t reserved = r.Get<uint16_t>("REGISTER reserved");
      m.address = r.Get<uint64_t>("REGISTER address");
      m.size = r.Get<uint64_t>("REGISTER size");
      m.offset = r.Get<uint64_t>("REGISTER offset");
      m.allocation_size = r.Get<uint64_t>("REGISTER allocation_size");
      r.Bytes(m.ipc_handle.data(), m.ipc_handle.size(), "REGISTER ipc_handle");
      m.gpu = r.String(kMaxGpuBytes, "REGISTER gpu");
      if (!KnownKind(kind)) r.Fail(absl::StrFormat("REGISTER names unknown memory kind %u", kind));
      if ((flags & ~kWritableFlag) != 0) {
        r.Fail(absl::StrFormat("REGISTER flags 0x%02x has unknown bits", flags));
      }
      if (reserved != 0) r.Fail("REGISTER reserved field is not 0");
      m.kind = static_cast<MemoryKind>(kind);
      m.writable = (flags & kWritableFlag) != 0;
      body = std::move(m);
      break;
    }
    case MessageType::kRegistered:
      body = Registered{r.Get<uint32_t>("REGISTERED rkey")};
      break;
    case MessageType::kDeregister:
      body = Deregister{r.Get<uint32_t>("DEREGISTER rkey")};
      break;
    case MessageType::kDeregistered:
      body = Deregistered{};
      break;
    case MessageType::kOpenChannel:
      body = OpenChannel{};
      break;
    case MessageType::kChannelOpen:
      body = ChannelOpen{};
      break;
    case MessageType::kError: {
      Error m;
      m.code = r.Get<uint32_t>("ERROR code");
      m.message = r.String(kMaxErrorBytes, "ERROR message");
      body = std::move(m);
      break;
    }
    case MessageType::kRegisterChunk:
      body = RegisterChunk{r.Get<uint64_t>("REGISTER_CHUNK size")};
      break;
    case MessageType::kChunkStaged:
      body = ChunkStaged{r.Get<uint32_t>("CHUNK_STAGED staged")};
      break;
  }
  const char* name = MessageTypeName(type);
  if (absl::Status s = r.Finish(name); !s.ok()) return s;
  // What the fields mean, once they all parsed.
  if (const auto* m = std::get_if<HelloOk>(&body); m && m->session == 0) {
    return absl::InvalidArgumentError("HELLO_OK names session 0");
  }
  if (const auto* m = std::get_if<Register>(&body)) {
    if (absl::Status s = CheckRegister(*m); !s.ok()) return s;
  }
  if (const auto* m = std::get_if<RegisterChunk>(&body); m && m->size == 0) {
    return absl::InvalidArgumentError("REGISTER_CHUNK of 0 bytes (size must be > 0)");
  }
  if (const auto* m = std::get_if<ChunkStaged>(&body);
      m && (m->staged == 0 || m->staged > kMaxChunks)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CHUNK_STAGED counts %u chunks (1..%u)", m->staged, kMaxChunks));
  }
  if (const auto* m = std::get_if<Registered>(&body); m && m->rkey == 0) {
    return absl::InvalidArgumentError("REGISTERED names rkey 0");
  }
  if (const auto* m = std::get_if<Deregister>(&body); m && m->rkey == 0) {
    return absl::InvalidArgumentError("DEREGISTER names rkey 0");
  }
  if (const auto* m = std::get_if<Error>(&body); m && (m->code == 0 || m->code > 16)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ERROR carries status code %u (1..16, never OK)", m->code));
  }
  return body;
}

}  // namespace

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHostMemfd:
      return "host-memfd";
    case MemoryKind::kGpuIpc:
      return "gpu-ipc";
    case MemoryKind::kGpuVmmFd:
      return "gpu-vmm-fd";
    case MemoryKind::kGpuVmmChunks:
      return "gpu-vmm-chunks";
  }
  return "unknown";
}

MessageType TypeOf(const Body& body) {
  return static_cast<MessageType>(body.index() + 1);  // Body lists the types in wire order
}

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "HELLO";
    case MessageType::kHelloOk:
      return "HELLO_OK";
    case MessageType::kRegister:
      return "REGISTER";
    case MessageType::kRegistered:
      return "REGISTERED";
    case MessageType::kDeregister:
      return "DEREGISTER";
    case MessageType::kDeregistered:
      return "DEREGISTERED";
    case MessageType::kOpenChannel:
      return "OPEN_CHANNEL";
    case MessageType::kChannelOpen:
      return "CHANNEL_OPEN";
    case MessageType::kError:
      return "ERROR";
    case MessageType::kRegisterChunk:
      return "REGISTER_CHUNK";
    case MessageType::kChunkStaged:
      return "CHUNK_STAGED";
  }
  return "UNKNOWN";
}

size_t FdsFor(const Body& body) {
  if (const auto* r = std::get_if<Register>(&body)) {
    return r->kind == MemoryKind::kHostMemfd || r->kind == MemoryKind::kGpuVmmFd ? 1 : 0;
  }
  return std::holds_alternative<ChannelOpen>(body) || std::holds_alternative<RegisterChunk>(body)
             ? 1
             : 0;
}

std::string Encode(const Message& message) {
  Writer w;
  w.Put<uint32_t>(kMagic);
  w.Put<uint16_t>(kVersion);
  w.Put<uint16_t>(static_cast<uint16_t>(TypeOf(message.body)));
  w.Put<uint32_t>(message.request_id);
  w.Put<uint32_t>(0);  // body bytes, set below
  EncodeBody(w, message.body);
  std::string& out = w.out();
  const uint32_t body_bytes = static_cast<uint32_t>(out.size() - kHeaderBytes);
  std::memcpy(out.data() + 12, &body_bytes, sizeof(body_bytes));
  return std::move(out);
}

std::optional<uint32_t> RequestIdOf(absl::string_view packet) {
  if (packet.size() < kHeaderBytes) return std::nullopt;
  Reader r(packet);
  const uint32_t magic = r.Get<uint32_t>("magic");
  const uint16_t version = r.Get<uint16_t>("version");
  r.Get<uint16_t>("type");
  const uint32_t id = r.Get<uint32_t>("request id");
  if (magic != kMagic || version != kVersion) return std::nullopt;
  return id;
}

absl::StatusOr<Message> Decode(absl::string_view packet, size_t fd_count) {
  if (packet.size() > kMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "message of %u bytes, more than the protocol's %u", packet.size(), kMaxMessageBytes));
  }
  if (packet.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "message of %u bytes, shorter than the %u-byte header", packet.size(), kHeaderBytes));
  }
  Reader h(packet.substr(0, kHeaderBytes));
  const uint32_t magic = h.Get<uint32_t>("magic");
  const uint16_t version = h.Get<uint16_t>("version");
  const uint16_t type = h.Get<uint16_t>("type");
  Message m;
  m.request_id = h.Get<uint32_t>("request id");
  const uint32_t body_bytes = h.Get<uint32_t>("body length");
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad magic 0x%08x (0x%08x: not a gdrstore handoff peer)", magic, kMagic));
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("handoff protocol version %u, this end speaks %u", version, kVersion));
  }
  if (!KnownType(type)) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown message type %u", type));
  }
  const auto mt = static_cast<MessageType>(type);
  const size_t have = packet.size() - kHeaderBytes;
  if (body_bytes != have) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s says its body is %u bytes but %u came (%s)", MessageTypeName(mt), body_bytes, have,
        body_bytes > have ? "a length past the packet" : "trailing bytes"));
  }
  Reader r(packet.substr(kHeaderBytes));
  absl::StatusOr<Body> body = DecodeBody(mt, r);
  if (!body.ok()) return body.status();
  m.body = *std::move(body);
  const size_t want = FdsFor(m.body);
  if (fd_count != want) {
    std::string what = MessageTypeName(mt);
    if (const auto* reg = std::get_if<Register>(&m.body)) {
      absl::StrAppend(&what, " of ", MemoryKindName(reg->kind), " memory");
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s carries %u descriptors; it takes %u", what, fd_count, want));
  }
  return m;
}

}  // namespace gdr::handoff
