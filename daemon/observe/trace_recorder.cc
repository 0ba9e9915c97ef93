#include "daemon/observe/trace_recorder.h"

#include "absl/time/time.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"

namespace gdr {
namespace {

constexpr absl::Duration kWriterPeriod = absl::Milliseconds(100);

}  // namespace

absl::StatusOr<std::unique_ptr<TraceRecorder>> TraceRecorder::Create(std::string path,
                                                                     uint64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<trace::TraceFileWriter>> w =
      trace::TraceFileWriter::Create(path, max_bytes, absl::GetCurrentTimeNanos());
  if (!w.ok()) return w.status();
  std::unique_ptr<TraceRecorder> r(new TraceRecorder(std::move(path), max_bytes, std::move(*w)));
  r->thread_ = std::thread([rec = r.get()] {
    SetThreadName("gdr-trace");
    rec->Run();
  });
  return r;
}

TraceRecorder::TraceRecorder(std::string path, uint64_t max_bytes,
                             std::unique_ptr<trace::TraceFileWriter> writer)
    : path_(std::move(path)), max_bytes_(max_bytes), writer_(std::move(writer)) {
  bytes_.store(writer_->bytes());
}

TraceRecorder::~TraceRecorder() { Close(); }

void TraceRecorder::Record(trace::OpEvent e) {
  absl::MutexLock lock(&mu_);
  if (closing_ || queue_.size() >= kMaxQueued) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  queue_.push_back(std::move(e));
  // The writer waits on a CondVar, not on a Mutex condition: an unlock with a condition waiter
  // takes the Mutex's slow path, which every op would pay.
  if (queue_.size() == kWakeBatch) wake_.Signal();
}

void TraceRecorder::Reopen() {
  absl::MutexLock lock(&mu_);
  reopen_ = true;
  wake_.Signal();
}

void TraceRecorder::Close() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

TraceRecorder::Stats TraceRecorder::stats() const {
  Stats s;
  s.records = records_.load();
  s.dropped = dropped_.load();
  s.bytes = bytes_.load();
  s.file = path_;
  return s;
}

void TraceRecorder::Run() {
  std::vector<trace::OpEvent> batch;
  for (;;) {
    bool reopen = false, closing = false;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time deadline = absl::Now() + kWriterPeriod;
      while (queue_.size() < kWakeBatch && !reopen_ && !closing_) {
        if (wake_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
      }
      batch.swap(queue_);
      reopen = reopen_;
      reopen_ = false;
      closing = closing_;
    }
    Write(batch);
    batch.clear();
    if (reopen) OpenNext();
    if (closing) break;
  }
  if (writer_ != nullptr) {
    if (absl::Status s = writer_->Flush(); !s.ok()) GDR_LOG(kError) << s.message();
    writer_.reset();
  }
}

void TraceRecorder::Write(std::vector<trace::OpEvent>& batch) {
  if (batch.empty()) return;
  uint64_t written = 0;
  for (const trace::OpEvent& e : batch) {
    if (writer_ != nullptr && writer_->Append(e)) ++written;
  }
  records_.fetch_add(written);
  dropped_.fetch_add(batch.size() - written);
  if (writer_ == nullptr) return;
  if (absl::Status s = writer_->Flush(); !s.ok()) {
    GDR_LOG_EVERY_N_SEC(kError, 60) << s.message() << "; ops are dropped until SIGHUP reopens it";
  }
  bytes_.store(writer_->bytes());
  if (writer_->stopped() && !logged_stop_) {
    logged_stop_ = true;
    GDR_LOG(kWarning) << "trace " << path_ << " reached --trace-max-bytes (" << max_bytes_
                      << " bytes): recording stopped; dropped ops are counted in GetStats "
                         "(SIGHUP starts a new file)";
  }
}

void TraceRecorder::OpenNext() {
  writer_.reset();  // flushes and closes the old file first
  logged_stop_ = false;
  absl::StatusOr<std::unique_ptr<trace::TraceFileWriter>> w =
      trace::TraceFileWriter::Create(path_, max_bytes_, absl::GetCurrentTimeNanos());
  if (!w.ok()) {
    GDR_LOG(kError) << w.status().message() << "; ops are dropped until the next SIGHUP";
    bytes_.store(0);
    return;
  }
  writer_ = std::move(*w);
  bytes_.store(writer_->bytes());
  GDR_LOG(kInfo) << "trace " << path_ << " reopened";
}

}  // namespace gdr
