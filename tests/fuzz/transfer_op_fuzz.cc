// Fuzzes request validation (daemon/service/validate_op.h ValidateOp) with whatever a client
// can put on the wire: the bytes are parsed as the gdrstore.v1 message the service would have
// received, and every op in it is validated against a small in-memory store.
//
// Input: byte 0 picks the message (bits 0-1: WriteRequest, ReadRequest, StreamRequest) and the
// transports the daemon offers (bit 2 tcp, bit 3 rc, bit 4 dc); the rest is the serialized
// message. Properties of an accepted op: nonzero length within max_op_bytes, [offset,
// offset+length) inside the named volume without overflow, the store pointer at that offset,
// a remote range that does not wrap, a nonzero rkey, and an endpoint of an offered transport
// with its fields in range (a tcp one with its 16..64-byte secret, kept apart from Key()). A
// refusal carries a code of the proto's status table and a printable message that never holds
// the endpoint's secret.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/match.h"
#include "common/wire/stream_limits.h"
#include "common/wire/tcp_proof.h"
#include "daemon/service/validate_op.h"
#include "daemon/store/store.h"
#include "gdrstore/v1/gdrstore.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/daemon/transport/parsing_transports.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace v1 = gdrstore::v1;
using gdr::Direction;

constexpr uint64_t kMaxOpBytes = 256 << 10;

// Sizes chosen so that the max op size is smaller than one volume and larger than another, and
// one is not a multiple of a page.
const gdr::Store& FuzzStore() {
  static const gdr::Store* store = [] {
    absl::StatusOr<std::unique_ptr<gdr::Store>> s =
        gdr::Store::Create(
            {{"vol0", 1 << 20, {}, {}}, {"small", 4096, {}, {}}, {"odd", 12345, {}, {}}});
    GDR_FUZZ_CHECK(s.ok());
    return s->release();
  }();
  return *store;
}

void CheckAccepted(const gdr::TransferOp& op, Direction direction, const v1::Extent& extent,
                   const v1::RemoteBuffer& buffer, const gdr::OfferedTransports& offered) {
  std::shared_ptr<const gdr::Volume> volume = FuzzStore().Find(extent.volume());
  GDR_FUZZ_CHECK(volume != nullptr);
  GDR_FUZZ_CHECK(op.volume == volume->name());
  GDR_FUZZ_CHECK(op.direction == direction);
  GDR_FUZZ_CHECK(op.length == extent.length() && op.offset == extent.offset());
  GDR_FUZZ_CHECK(op.length > 0 && op.length <= kMaxOpBytes);
  GDR_FUZZ_CHECK(op.offset <= volume->size() && op.length <= volume->size() - op.offset);
  GDR_FUZZ_CHECK(op.local == volume->data() + op.offset);
  GDR_FUZZ_CHECK(op.store_volume == volume);  // the op holds the volume it was checked against
  GDR_FUZZ_CHECK(op.length == buffer.length());
  GDR_FUZZ_CHECK(op.remote_address == buffer.address());
  GDR_FUZZ_CHECK(op.remote_address <= UINT64_MAX - op.length);
  GDR_FUZZ_CHECK(op.rkey != 0 && op.rkey == buffer.rkey());
  GDR_FUZZ_CHECK(offered.Has(op.transport));
  switch (op.transport) {
    case gdr::TransportKind::kTcp: {
      GDR_FUZZ_CHECK(buffer.has_tcp());
      const gdr::TcpDestination* tcp = gdr::DestinationOf<gdr::TcpDestination>(op);
      GDR_FUZZ_CHECK(tcp != nullptr);
      GDR_FUZZ_CHECK(tcp->port != 0 && tcp->port == buffer.tcp().port());
      GDR_FUZZ_CHECK(!tcp->host.empty() && tcp->host.size() <= 255);
      GDR_FUZZ_CHECK(tcp->host.find('\0') == std::string::npos);
      GDR_FUZZ_CHECK(tcp->secret == buffer.tcp().secret());
      GDR_FUZZ_CHECK(tcp->secret.size() >= gdr::tcpwire::kMinSecretBytes &&
                     tcp->secret.size() <= gdr::tcpwire::kMaxSecretBytes);
      GDR_FUZZ_CHECK(tcp->Key().find(tcp->secret) == std::string::npos);
      break;
    }
    case gdr::TransportKind::kRc: {
      GDR_FUZZ_CHECK(buffer.has_rc());
      const gdr::RcDestination* rc = gdr::DestinationOf<gdr::RcDestination>(op);
      GDR_FUZZ_CHECK(rc != nullptr && rc->connection_id != 0);
      break;
    }
    case gdr::TransportKind::kDc: {
      GDR_FUZZ_CHECK(buffer.has_dc());
      const gdr::dc::DcDestination* dc = gdr::DestinationOf<gdr::dc::DcDestination>(op);
      GDR_FUZZ_CHECK(dc != nullptr);
      GDR_FUZZ_CHECK(dc->key.dct_number != 0 && dc->key.dct_number <= 0xFFFFFF);
      break;
    }
    case gdr::TransportKind::kLocal:
      GDR_FUZZ_CHECK(buffer.has_local());
      break;
  }
  // Touch both ends of the store range: the sanitizers see an access outside the mapping.
  volatile std::byte first = op.local[0];
  volatile std::byte last = op.local[op.length - 1];
  (void)first;
  (void)last;
}

void ValidateOne(Direction direction, const v1::Extent* extent, const v1::RemoteBuffer* buffer,
                 const gdr::OfferedTransports& offered) {
  // One set of (fake) transports per offered combination, reading endpoints with the real
  // transports' parsers.
  static const auto* sets = [] {
    auto* all = new std::unique_ptr<gdr::TransportSet>[8];
    for (unsigned bits = 0; bits < 8; ++bits) {
      gdr::OfferedTransports o;
      if (bits & 1) o.Add(gdr::TransportKind::kTcp);
      if (bits & 2) o.Add(gdr::TransportKind::kRc);
      if (bits & 4) o.Add(gdr::TransportKind::kDc);
      all[bits] = gdr::testing::ParsingTransports(o);
    }
    return all;
  }();
  const unsigned bits = (offered.Has(gdr::TransportKind::kTcp) ? 1 : 0) |
                        (offered.Has(gdr::TransportKind::kRc) ? 2 : 0) |
                        (offered.Has(gdr::TransportKind::kDc) ? 4 : 0);
  absl::StatusOr<gdr::TransferOp> op =
      gdr::ValidateOp(direction, extent, buffer, FuzzStore(), kMaxOpBytes, *sets[bits]);
  if (!op.ok()) {
    // The codes of gdrstore.proto's status table, and a message safe to log and to send back:
    // printable ASCII only, whatever bytes the request carried.
    const absl::StatusCode code = op.status().code();
    GDR_FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                   code == absl::StatusCode::kNotFound || code == absl::StatusCode::kOutOfRange ||
                   code == absl::StatusCode::kUnimplemented);
    GDR_FUZZ_CHECK(!op.status().message().empty());
    for (char c : op.status().message()) GDR_FUZZ_CHECK(c >= 0x20 && c <= 0x7e);
    // The endpoint's secret is never echoed, whatever else the request got wrong.
    if (buffer != nullptr && buffer->has_tcp() &&
        buffer->tcp().secret().size() >= gdr::tcpwire::kMinSecretBytes) {
      GDR_FUZZ_CHECK(!absl::StrContains(op.status().message(), buffer->tcp().secret()));
    }
    return;
  }
  GDR_FUZZ_CHECK(extent != nullptr && buffer != nullptr);
  CheckAccepted(*op, direction, *extent, *buffer, offered);
}

}  // namespace

// Protobuf logs every string field that is not UTF-8 (a refused parse, as in the server):
// silence it so the fuzzer's output stays readable and fast.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  gdr::OfferedTransports offered;
  if ((selector & 0x04) != 0) offered.Add(gdr::TransportKind::kTcp);
  if ((selector & 0x08) != 0) offered.Add(gdr::TransportKind::kRc);
  if ((selector & 0x10) != 0) offered.Add(gdr::TransportKind::kDc);
  const void* bytes = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (selector & 0x03) {
    case 0: {
      v1::WriteRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      ValidateOne(Direction::kStoreToClient, req.has_extent() ? &req.extent() : nullptr,
                  req.has_buffer() ? &req.buffer() : nullptr, offered);
      break;
    }
    case 1: {
      v1::ReadRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      ValidateOne(Direction::kClientToStore, req.has_extent() ? &req.extent() : nullptr,
                  req.has_buffer() ? &req.buffer() : nullptr, offered);
      break;
    }
    default: {
      v1::StreamRequest req;
      if (!req.ParseFromArray(bytes, n)) return 0;
      for (int i = 0; i < req.ops_size() && i < gdr::kMaxOpsPerMessage; ++i) {
        const v1::StreamOp& op = req.ops(i);
        if (op.has_write()) {
          const v1::WriteRequest& w = op.write();
          ValidateOne(Direction::kStoreToClient, w.has_extent() ? &w.extent() : nullptr,
                      w.has_buffer() ? &w.buffer() : nullptr, offered);
        } else if (op.has_read()) {
          const v1::ReadRequest& r = op.read();
          ValidateOne(Direction::kClientToStore, r.has_extent() ? &r.extent() : nullptr,
                      r.has_buffer() ? &r.buffer() : nullptr, offered);
        }
      }
      break;
    }
  }
  return 0;
}
