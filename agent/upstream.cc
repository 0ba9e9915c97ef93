#include "agent/upstream.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"
#include "common/wire/volume_name.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

namespace {

// The client library's OpStream answers an op it never sent, because its call had already
// ended or been closed, with these words (client/src/op_stream.cc, Reactor::Submit): such an op
// may go again on a fresh stream without ever having run twice.
bool NeverSent(const absl::Status& s) {
  return absl::StartsWith(s.message(), "stream has ended") ||
         absl::StartsWith(s.message(), "stream is closed");
}

// An op failure that may mean its Stream call is over (the daemon restarted, a link or the
// channel broke) or hung: the lane is replaced. Replacing a healthy one costs one new call.
bool LaneSuspect(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnauthenticated:
      return true;
    default:
      return NeverSent(s);
  }
}

}  // namespace

Upstream::Upstream(std::unique_ptr<gdrstore::Client> client, std::string address)
    : address_(std::move(address)), client_(std::move(client)) {}

absl::StatusOr<std::unique_ptr<Upstream>> Upstream::Connect(const gdrstore::ClientOptions& options,
                                                            uint32_t streams) {
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = gdrstore::Client::Connect(options);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("daemon ", options.daemon_address, " over ",
                                     gdrstore::TransportName(options.transport), ": ",
                                     client.status().message()));
  }
  std::unique_ptr<Upstream> up(new Upstream(*std::move(client), options.daemon_address));
  {
    absl::MutexLock lock(&up->mu_);
    for (uint32_t i = 0; i < std::max(streams, 1u); ++i) {
      absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> s = up->client_->OpenStream();
      if (!s.ok()) return s.status();
      up->lanes_.push_back(Lane{std::move(*s), 0});
    }
  }
  up->closer_ = std::thread([p = up.get()] { p->CloseRetired(); });
  return up;
}

Upstream::~Upstream() {
  {
    absl::MutexLock lock(&mu_);
    for (Lane& l : lanes_) retired_.push_back(std::move(l.stream));
    lanes_.clear();
    stopping_ = true;
  }
  if (closer_.joinable()) closer_.join();
  client_.reset();
}

absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> Upstream::Register(
    const handoff::ImportedRegion& region) {
  // Registered with the handle it came by: over transport local the daemon is handed the same
  // memory (the agent could not export imported GPU memory again); tcp, rc and dc register the
  // agent's mapping.
  const handoff::Register& s = region.source();
  const bool released =
      s.kind != handoff::MemoryKind::kGpuIpc && region.source_fd() < 0 &&
      std::all_of(region.source_chunks().begin(), region.source_chunks().end(),
                  [](const handoff::StagedChunk& c) { return !c.fd.valid(); });
  if (released) {
    // Registered again after the handoff closed its descriptors (a daemon found after the
    // region came, --daemon-service): tcp, rc and dc need only the agent's mapping.
    return region.gpu() ? client_->RegisterGpuMemory(region.device_ptr(), region.size())
                        : client_->RegisterHostMemory(region.host(), region.size());
  }
  gdrstore::HandedOver h;
  switch (s.kind) {
    case handoff::MemoryKind::kHostMemfd:
      h.kind = gdrstore::HandedOver::Kind::kHostMemfd;
      break;
    case handoff::MemoryKind::kGpuIpc:
      h.kind = gdrstore::HandedOver::Kind::kGpuIpcHandle;
      break;
    case handoff::MemoryKind::kGpuVmmFd:
    case handoff::MemoryKind::kGpuVmmChunks:
      h.kind = gdrstore::HandedOver::Kind::kGpuVmmFd;
      break;
  }
  for (const handoff::StagedChunk& c : region.source_chunks()) {
    h.chunks.push_back(gdrstore::HandedOver::VmmChunk{c.fd.get(), c.size});
  }
  h.fd = region.source_fd();
  h.offset = s.offset;
  h.allocation_size = s.allocation_size;
  std::copy(s.ipc_handle.begin(), s.ipc_handle.end(), h.ipc_handle.begin());
  h.gpu = s.gpu;
  return client_->RegisterHandedOver(region.host(), region.device_ptr(), region.size(), h);
}

uint32_t Upstream::PickLane() { return next_lane_.fetch_add(1, std::memory_order_relaxed); }

std::chrono::system_clock::time_point Upstream::DeadlineOf(const UpstreamOp& op) const {
  if (op.deadline != std::chrono::system_clock::time_point::max()) return op.deadline;
  const std::chrono::milliseconds timeout = client_->rpc_timeout();
  if (timeout.count() == 0) return std::chrono::system_clock::time_point::max();
  return std::chrono::system_clock::now() + timeout;
}

void Upstream::Submit(const UpstreamOp& op, uint32_t lane, Done done) {
  UpstreamOp fixed = op;
  fixed.deadline = DeadlineOf(op);  // once: a resubmission keeps the op's first deadline
  SubmitOnLane(fixed, lane, false, std::move(done));
}

void Upstream::SubmitOnLane(const UpstreamOp& op, uint32_t lane, bool retried, Done done) {
  std::shared_ptr<gdrstore::OpStream> stream;
  uint64_t generation = 0;
  uint32_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!lanes_.empty()) {
      index = lane % static_cast<uint32_t>(lanes_.size());
      stream = lanes_[index].stream;
      generation = lanes_[index].generation;
    }
  }
  if (stream == nullptr) {
    done(absl::UnavailableError("the agent's upstream client is closing"));
    return;
  }
  stream->Submit(
      op.kind, op.extent, *op.buffer, op.offset,
      [this, op, index, generation, retried,
       done = std::move(done)](absl::StatusOr<gdrstore::OpResult> r) mutable {
        if (!r.ok() && LaneSuspect(r.status())) {
          Retire(index, generation);
          if (!retried && NeverSent(r.status())) {
            SubmitOnLane(op, index, true, std::move(done));
            return;
          }
        }
        done(std::move(r));
      },
      gdrstore::OpOptions{op.deadline, op.crc32c, false});
}

void Upstream::Retire(uint32_t lane, uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || lane >= lanes_.size() || lanes_[lane].generation != generation) return;
  // Opening a stream starts the call and returns; nothing of it runs inline.
  absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> fresh = client_->OpenStream();
  if (!fresh.ok()) {
    GDR_LOG_EVERY_N_SEC(kWarning, 5) << "cannot open a stream to " << address_ << ": "
                                      << fresh.status().message();
    return;
  }
  retired_.push_back(std::move(lanes_[lane].stream));
  lanes_[lane].stream = std::move(*fresh);
  ++lanes_[lane].generation;
  replaced_.fetch_add(1, std::memory_order_relaxed);
  GDR_LOG_EVERY_N_SEC(kInfo, 5) << "upstream stream " << lane << " to " << address_
                                 << " replaced after a failed op";
}

void Upstream::CloseRetired() {
  SetThreadName("gdragent-close");
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !retired_.empty();
  };
  for (;;) {
    std::shared_ptr<gdrstore::OpStream> stream;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (retired_.empty()) return;  // stopping, and every retired stream is closed
      stream = std::move(retired_.front());
      retired_.pop_front();
    }
    if (stream == nullptr) continue;
    // A submitter may still hold the stream for a Submit it is making (its op would be refused
    // "stream is closed" and sent again); close once none does. Retired, it is handed out no
    // more, so this ends.
    while (stream.use_count() > 1) absl::SleepFor(absl::Milliseconds(1));
    // Waits for the stream's ops (answered, or failed at their deadline).
    const absl::Status s = stream->Close();
    if (!s.ok()) GDR_LOG(kDebug) << "retired upstream stream ended: " << s.message();
  }
}

void Upstream::GetInfo(const v1::GetInfoRequest& request,
                       std::chrono::system_clock::time_point deadline, InfoDone done) {
  client_->GetInfo(request, deadline, std::move(done));
}

// GetAllInfo's pages so far and where the next starts.
struct Upstream::InfoPages {
  v1::GetInfoResponse all;
  v1::GetInfoRequest next;
  bool first = true;
  std::chrono::system_clock::time_point deadline;
  InfoDone done;
};

void Upstream::GetAllInfo(std::chrono::system_clock::time_point deadline, InfoDone done) {
  auto pages = std::make_shared<InfoPages>();
  pages->deadline = deadline;
  pages->done = std::move(done);
  AskPage(std::move(pages));
}

void Upstream::AskPage(std::shared_ptr<InfoPages> pages) {
  const v1::GetInfoRequest request = pages->next;
  GetInfo(request, pages->deadline, [this, pages](absl::StatusOr<v1::GetInfoResponse> r) {
    if (!r.ok()) {
      pages->done(std::move(r).status());
      return;
    }
    std::string after = std::move(*r->mutable_next_volumes_after());
    if (pages->first) {
      pages->all = *std::move(r);
      pages->first = false;
    } else {
      for (v1::VolumeInfo& v : *r->mutable_volumes()) *pages->all.add_volumes() = std::move(v);
    }
    if (after.empty()) {
      pages->done(std::move(pages->all));
      return;
    }
    // Names only grow page by page: a cursor that does not would ask until the deadline.
    if (after <= pages->next.volumes_after()) {
      pages->done(absl::InternalError(absl::StrCat(
          "GetInfo: the page after '", ShownVolumeName(pages->next.volumes_after()),
          "' names the same page next")));
      return;
    }
    pages->next.set_volumes_after(std::move(after));
    AskPage(pages);
  });
}

std::string Upstream::Path() const {
  const gdrstore::TransportInfo info = client_->transport_info();
  return absl::StrCat("agent -> ", address_, " over ", gdrstore::TransportName(info.kind),
                      info.description.empty() ? "" : absl::StrCat(" (", info.description, ")"));
}

}  // namespace gdr::agent
