#include "client/src/client_calls.h"

#include <algorithm>

namespace gdr {

bool ClientCalls::Enter() {
  // seq_cst on both sides: either Close sees this use, or this sees Close.
  uses_.fetch_add(1);
  if (!closing_.load()) return true;
  Leave();
  return false;
}

void ClientCalls::Leave() {
  if (uses_.fetch_sub(1) == 1 && closing_.load()) {
    // Close may be waiting for the count to reach 0: letting go of its mutex has it look again.
    absl::MutexLock lock(&mu_);
  }
}

bool ClientCalls::AddStream(std::weak_ptr<Stream> stream) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  // Streams destroyed already are dropped here, so the list stays as long as the live ones.
  streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                [](const std::weak_ptr<Stream>& s) { return s.expired(); }),
                 streams_.end());
  streams_.push_back(std::move(stream));
  return true;
}

bool ClientCalls::AddUnary(const std::shared_ptr<grpc::ClientContext>& ctx) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  unary_.emplace(ctx.get(), ctx);
  return true;
}

void ClientCalls::RemoveUnary(const grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  unary_.erase(ctx);
}

void ClientCalls::Close() {
  std::vector<std::shared_ptr<Stream>> streams;
  std::vector<std::shared_ptr<grpc::ClientContext>> unary;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    closing_.store(true);
    for (const std::weak_ptr<Stream>& w : streams_) {
      if (std::shared_ptr<Stream> s = w.lock()) streams.push_back(std::move(s));
    }
    streams_.clear();
    for (const auto& [raw, w] : unary_) {
      if (std::shared_ptr<grpc::ClientContext> ctx = w.lock()) unary.push_back(std::move(ctx));
    }
  }
  // Unlocked: a cancellation may run the call's reactions (which remove it here) at once.
  for (const std::shared_ptr<Stream>& s : streams) s->CancelForClientClose();
  for (const std::shared_ptr<grpc::ClientContext>& ctx : unary) ctx->TryCancel();
  unary.clear();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::atomic<int64_t>* uses) { return uses->load() == 0; }, &uses_));
  }
  for (const std::shared_ptr<Stream>& s : streams) s->AwaitEndForClientClose();
}

}  // namespace gdr
