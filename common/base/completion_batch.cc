#include "common/base/completion_batch.h"

namespace gdr {
namespace {
thread_local CompletionBatch* current_batch = nullptr;
}  // namespace

CompletionBatch::CompletionBatch() : outermost_(current_batch == nullptr) {
  if (outermost_) current_batch = this;
}

CompletionBatch::~CompletionBatch() {
  if (!outermost_) return;
  // Flushes may complete more work and defer again: keep draining until nothing is queued,
  // then close, so nothing deferred is ever left behind.
  while (!items_.empty()) {
    std::vector<Item> run;
    run.swap(items_);
    for (Item& item : run) item.flush();
  }
  current_batch = nullptr;
}

bool CompletionBatch::Defer(const void* key, std::function<void()> flush) {
  CompletionBatch* batch = current_batch;
  if (batch == nullptr) return false;
  for (const Item& item : batch->items_) {
    if (item.key == key) return true;
  }
  batch->items_.push_back(Item{key, std::move(flush)});
  return true;
}

bool CompletionBatch::Open() { return current_batch != nullptr; }

}  // namespace gdr
