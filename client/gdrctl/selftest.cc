#include "client/gdrctl/selftest.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/src/daemon_rpc.h"
#include "common/base/pattern.h"
#include "common/base/units.h"

namespace gdrctl {
namespace {

namespace v1 = gdrstore::v1;

class Steps {
 public:
  explicit Steps(std::ostream& out) : out_(out) {}
  void Pass(const std::string& step, const std::string& detail = "") {
    out_ << "PASS " << step << (detail.empty() ? "" : ": ") << detail << "\n" << std::flush;
  }
  void Fail(const std::string& step, const std::string& why) {
    ++failed_;
    out_ << "FAIL " << step << ": " << why << "\n" << std::flush;
  }
  void Fail(const std::string& step, const absl::Status& s) {
    Fail(step, absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message()));
  }
  void Skip(const std::string& step, const std::string& why) {
    out_ << "SKIP " << step << ": " << why << "\n" << std::flush;
  }
  int failed() const { return failed_; }

 private:
  std::ostream& out_;
  int failed_ = 0;
};

v1::Transport Wire(gdrstore::Transport t) {
  switch (t) {
    case gdrstore::Transport::kTcp: return v1::TRANSPORT_TCP;
    case gdrstore::Transport::kRc: return v1::TRANSPORT_RC;
    case gdrstore::Transport::kDc: return v1::TRANSPORT_DC;
    case gdrstore::Transport::kLocal: return v1::TRANSPORT_LOCAL;
    case gdrstore::Transport::kAuto: return v1::TRANSPORT_UNSPECIFIED;
  }
  return v1::TRANSPORT_UNSPECIFIED;
}

std::string Rate(uint64_t bytes, uint64_t ns) {
  if (ns == 0) return "";
  return absl::StrFormat(", daemon %.1f us, %.2f GB/s", ns / 1e3, static_cast<double>(bytes) / ns);
}

}  // namespace

int RunSelftest(const SelftestOptions& o, std::ostream& out) {
  Steps steps(out);
  const std::string tname = gdrstore::TransportName(o.client.transport);

  // 1. The daemon and what it offers.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(o.client);
  if (!channel.ok()) {
    steps.Fail("daemon", channel.status());
    return steps.failed();
  }
  auto stub = v1::GdrStore::NewStub(*channel);
  v1::GetInfoResponse info;
  {
    // The one volume the test uses, however many the daemon serves.
    v1::GetInfoRequest request;
    request.set_volume(o.volume);
    absl::StatusOr<v1::GetInfoResponse> got = gdrstore::GetInfoPages(
        *stub, std::move(request), std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!got.ok()) {
      steps.Fail("daemon", got.status());
      return steps.failed();
    }
    info = *std::move(got);
  }
  const v1::Transport wire = Wire(o.client.transport);
  bool offered = wire == v1::TRANSPORT_UNSPECIFIED;
  std::string detail = "transport auto: the client picks";
  for (const auto& t : info.transports()) {
    if (t.transport() == wire) {
      offered = t.available();
      detail = t.detail();
    }
  }
  if (!offered) {
    steps.Fail("daemon", absl::StrCat("gdrstored ", info.version(), " at ",
                                      o.client.daemon_address, " does not offer ", tname, ": ",
                                      detail.empty() ? "not listed" : detail));
    return steps.failed();
  }
  steps.Pass("daemon", absl::StrCat("gdrstored ", info.version(), ", ", tname, ": ", detail));
  uint64_t volume_size = 0;
  for (const auto& v : info.volumes()) {
    if (v.name() == o.volume) volume_size = v.size();
  }
  if (volume_size == 0) {
    steps.Fail("volume", absl::StrCat("the daemon has no volume '", o.volume, "'"));
    return steps.failed();
  }

  // 2. This host's side of the transport (dc: the DCT).
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = gdrstore::Client::Connect(o.client);
  if (!client.ok()) {
    steps.Fail(absl::StrCat("local ", tname), client.status());
    return steps.failed();
  }
  const gdrstore::TransportInfo ti = (*client)->transport_info();
  std::string local = gdrstore::TransportName(ti.kind);
  if (ti.dct_number != 0) absl::StrAppend(&local, absl::StrFormat(": DCT 0x%06x", ti.dct_number));
  if (auto r = ti.rdma) absl::StrAppend(&local, " on ", r->device, " port ", r->port);
  if (!ti.auto_notes.empty()) absl::StrAppend(&local, " (", ti.auto_notes, ")");
  steps.Pass(absl::StrCat("local ", tname), local);

  // 3. Registration.
  std::vector<uint64_t> sizes = o.sizes;
  if (sizes.empty()) sizes = {1, 4095, 64 << 10, (1 << 20) + 7, 16 << 20};
  const uint64_t room = o.offset < volume_size ? volume_size - o.offset : 0;
  const uint64_t max_op = info.limits().max_op_bytes();
  uint64_t largest = 0;
  for (uint64_t s : sizes)
    if (s <= room && s <= max_op) largest = std::max(largest, s);
  if (largest == 0) {
    steps.Fail("sizes", absl::StrCat("none fits volume '", o.volume, "' after offset ", o.offset,
                                     " and the daemon's max op of ", max_op, " bytes"));
    return steps.failed();
  }
  absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> buf = (*client)->AllocateBuffer(largest);
  if (!buf.ok()) {
    steps.Fail("register", buf.status());
    return steps.failed();
  }
  gdrstore::Buffer& b = **buf;
  steps.Pass("register", absl::StrFormat("%s host buffer, rkey 0x%x", gdr::FormatSize(largest), b.rkey()));

  const uint64_t base_seed = gdr::PatternSeed(o.volume, 0);
  std::mt19937_64 rng(std::random_device{}());
  bool store_touched = false;
  for (uint64_t size : sizes) {
    const std::string sz = gdr::FormatSize(size);
    if (size > room || size > max_op) {
      steps.Skip(absl::StrCat("write ", sz), "larger than the volume room or the daemon's max op");
      continue;
    }
    std::span<std::byte> view(b.data(), size);
    // Write: store -> buffer; the buffer must hold the volume's initial pattern afterwards.
    std::memset(b.data(), 0xA5, size);
    const gdrstore::Extent extent{o.volume, o.offset, size};
    absl::StatusOr<gdrstore::OpResult> w = (*client)->Write(extent, b, 0);
    if (!w.ok()) {
      steps.Fail(absl::StrCat("write ", sz), w.status());
    } else if (auto bad = gdr::PatternMismatch(base_seed, o.offset, view)) {
      steps.Fail(absl::StrCat("write ", sz), absl::StrCat("byte ", *bad, " differs from the store"));
    } else {
      steps.Pass(absl::StrCat("write ", sz), absl::StrCat("verified", Rate(size, w->service_ns)));
    }
    // Read: buffer -> store with a fresh pattern, proven by writing it back.
    const uint64_t salt = rng() | 1;
    const uint64_t seed = gdr::PatternSeed(o.volume, salt);
    gdr::PatternFill(seed, o.offset, view);
    store_touched = true;
    absl::StatusOr<gdrstore::OpResult> r = (*client)->Read(extent, b, 0);
    if (!r.ok()) {
      steps.Fail(absl::StrCat("read ", sz), r.status());
      continue;
    }
    std::memset(b.data(), 0x5A, size);
    absl::StatusOr<gdrstore::OpResult> back = (*client)->Write(extent, b, 0);
    if (!back.ok()) {
      steps.Fail(absl::StrCat("read ", sz), back.status());
    } else if (auto bad = gdr::PatternMismatch(seed, o.offset, view)) {
      steps.Fail(absl::StrCat("read ", sz),
                 absl::StrCat("byte ", *bad, " of what the daemon read did not reach the store"));
    } else {
      steps.Pass(absl::StrCat("read ", sz), absl::StrCat("verified", Rate(size, r->service_ns)));
    }
    // The next size's Write expects the initial pattern: put it back (one more Read).
    gdr::PatternFill(base_seed, o.offset, view);
    if (absl::StatusOr<gdrstore::OpResult> undo = (*client)->Read(extent, b, 0); !undo.ok()) {
      steps.Fail(absl::StrCat("restore ", sz), undo.status());
    } else {
      store_touched = false;
    }
  }

  // 4. A remote access error on purpose: a wrong rkey must be refused by this host's NIC
  // (PERMISSION_DENIED), and the daemon must recover its initiator for the next op.
  {
    absl::StatusOr<v1::RemoteBuffer> rb = (*client)->Describe(b, 0, 1);
    if (!rb.ok()) {
      steps.Fail("bad rkey", rb.status());
    } else {
      rb->set_rkey(rb->rkey() ^ 0x00FF00FFu);
      if (rb->rkey() == 0) rb->set_rkey(0x1234);
      v1::WriteRequest req;
      req.mutable_extent()->set_volume(o.volume);
      req.mutable_extent()->set_offset(o.offset);
      req.mutable_extent()->set_length(1);
      *req.mutable_buffer() = *rb;
      v1::OpResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      // A descriptor altered on purpose is no op of the public API: the raw request goes on
      // the Client's own channel.
      grpc::Status st = gdr::DaemonStub(**client)->Write(&ctx, req, &resp);
      if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        steps.Pass("bad rkey", absl::StrCat("refused as expected: ", st.error_message()));
      } else {
        steps.Fail("bad rkey", absl::StrCat("expected PERMISSION_DENIED, got ",
                                            absl::StatusCodeToString(
                                                gdrstore::FromGrpcStatus(st).code()),
                                            ": ", st.error_message()));
      }
    }
    absl::StatusOr<gdrstore::OpResult> again =
        (*client)->Write(gdrstore::Extent{o.volume, o.offset, 1}, b, 0);
    if (!again.ok()) {
      steps.Fail("recovery", again.status());
    } else {
      steps.Pass("recovery", "the next op after the error succeeded");
    }
  }

  // 5. Put the volume's initial pattern back if a Read step left its test pattern there.
  if (store_touched) {
    std::span<std::byte> view(b.data(), largest);
    gdr::PatternFill(base_seed, o.offset, view);
    absl::StatusOr<gdrstore::OpResult> r =
        (*client)->Read(gdrstore::Extent{o.volume, o.offset, largest}, b, 0);
    if (!r.ok()) {
      steps.Fail("restore", r.status());
    } else {
      steps.Pass("restore", absl::StrCat(gdr::FormatSize(largest), " of the initial pattern back"));
    }
  }
  out << (steps.failed() == 0 ? "selftest PASSED" : absl::StrCat("selftest FAILED: ", steps.failed(), " step(s)"))
      << " (transport " << tname << ")\n";
  return steps.failed();
}

}  // namespace gdrctl
