#include "bench/raw_tcp.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/monotonic_ns.h"
#include "common/base/socket.h"
#include "common/base/status_macros.h"

namespace gdrbench {
namespace {

using Clock = std::chrono::steady_clock;

// Both ends of one loopback connection, set up as a tcp link's.
struct Pair {
  gdr::ScopedFd out, in;
};

absl::StatusOr<std::vector<Pair>> ConnectPairs(size_t pairs) {
  uint16_t port = 0;
  GDR_ASSIGN_OR_RETURN(gdr::ScopedFd listener,
                       gdr::ListenTcp("127.0.0.1", 0, static_cast<int>(pairs) + 4, &port));
  std::vector<Pair> out(pairs);
  for (Pair& p : out) {
    GDR_ASSIGN_OR_RETURN(p.out, gdr::ConnectTcp("127.0.0.1", port, absl::Seconds(3)));
    p.in = gdr::ScopedFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!p.in.valid()) return absl::ErrnoToStatus(errno, "accept");
    int one = 1;
    ::setsockopt(p.in.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(p.out.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    gdr::SetSocketBuffers(p.in.get(), kProductSocketBuffer);
    gdr::SetSocketBuffers(p.out.get(), kProductSocketBuffer);
  }
  return out;
}

}  // namespace

TouchedMemory::TouchedMemory(size_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  data_ = static_cast<char*>(p);
  std::memset(data_, 0x5a, bytes);
}

TouchedMemory::~TouchedMemory() {
  if (data_) ::munmap(data_, size_);
}

absl::StatusOr<double> RawTcpStream(uint64_t size, uint64_t ops, const TouchedMemory& src,
                                    const TouchedMemory& dst) {
  GDR_ASSIGN_OR_RETURN(std::vector<Pair> pairs, ConnectPairs(1));
  const int out = pairs[0].out.get(), in = pairs[0].in.get();
  const Clock::time_point t0 = Clock::now();
  absl::Status send_status;
  std::thread sender([&] {
    for (uint64_t i = 0; i < ops && send_status.ok(); ++i) {
      send_status = gdr::WriteFull(out, src.data(), size);
    }
  });
  absl::Status recv_status;
  for (uint64_t i = 0; i < ops && recv_status.ok(); ++i) {
    recv_status = gdr::ReadFull(in, dst.data(), size);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!recv_status.ok()) ::shutdown(out, SHUT_RDWR);  // unblock the sender
  sender.join();
  GDR_RETURN_IF_ERROR(send_status);
  GDR_RETURN_IF_ERROR(recv_status);
  return static_cast<double>(size * ops) / seconds / 1e9;
}

uint32_t BaselineStreams(const std::vector<uint32_t>& links) {
  uint64_t sum = 0;
  for (uint32_t l : links) sum += std::max<uint32_t>(l, 1);
  return static_cast<uint32_t>(std::clamp<uint64_t>(sum, 1, UINT32_MAX));
}

StreamPlan PlanStreams(uint64_t total_bytes, uint32_t streams, uint64_t op_size) {
  StreamPlan p;
  p.streams = std::max<uint32_t>(streams, 1);
  p.write_bytes = std::clamp<uint64_t>(op_size, 1, kProductChunk);
  const uint64_t share = (std::max<uint64_t>(total_bytes, 1) + p.streams - 1) / p.streams;
  p.writes = (share + p.write_bytes - 1) / p.write_bytes;
  return p;
}

absl::StatusOr<StreamBuffers> StreamBuffers::Create(size_t pairs, uint64_t size) {
  StreamBuffers b;
  GDR_RETURN_IF_ERROR(b.Reserve(pairs, size));
  return b;
}

absl::Status StreamBuffers::Reserve(size_t pairs, uint64_t size) {
  if (!src.empty() && src[0]->size() < size) {
    src.clear();
    dst.clear();
  }
  while (src.size() < pairs) {
    src.push_back(std::make_unique<TouchedMemory>(size));
    dst.push_back(std::make_unique<TouchedMemory>(size));
    if (src.back()->data() == nullptr || dst.back()->data() == nullptr) {
      const size_t i = src.size() - 1;
      src.pop_back();
      dst.pop_back();
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map 2 x ", size, " bytes for raw TCP stream ", i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StreamsResult> RawTcpStreams(size_t pairs, uint64_t size, uint64_t ops,
                                            const StreamBuffers& buffers) {
  if (pairs == 0 || buffers.src.size() < pairs || buffers.dst.size() < pairs ||
      buffers.src[0]->size() < size) {
    return absl::InvalidArgumentError("raw TCP streams: buffers do not cover every pair");
  }
  GDR_ASSIGN_OR_RETURN(std::vector<Pair> conns, ConnectPairs(pairs));
  struct Side {
    absl::Status status;
    int64_t ns = 0;  // sender: its first send; receiver: its last byte
  };
  std::vector<Side> sent(pairs), received(pairs);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  auto wait_go = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
  };
  std::vector<std::thread> threads;
  threads.reserve(2 * pairs);
  for (size_t i = 0; i < pairs; ++i) {
    threads.emplace_back([&, i] {
      wait_go();
      sent[i].ns = MonotonicNs();
      for (uint64_t k = 0; k < ops && sent[i].status.ok(); ++k) {
        sent[i].status = gdr::WriteFull(conns[i].out.get(), buffers.src[i]->data(), size);
      }
      // A failed sender must not leave its receiver waiting for bytes that never come.
      if (!sent[i].status.ok()) ::shutdown(conns[i].in.get(), SHUT_RDWR);
    });
    threads.emplace_back([&, i] {
      wait_go();
      for (uint64_t k = 0; k < ops && received[i].status.ok(); ++k) {
        received[i].status = gdr::ReadFull(conns[i].in.get(), buffers.dst[i]->data(), size);
      }
      received[i].ns = MonotonicNs();
      if (!received[i].status.ok()) ::shutdown(conns[i].out.get(), SHUT_RDWR);
    });
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  int64_t first = INT64_MAX, last = 0;
  for (size_t i = 0; i < pairs; ++i) {
    GDR_RETURN_IF_ERROR(sent[i].status);
    GDR_RETURN_IF_ERROR(received[i].status);
    first = std::min(first, sent[i].ns);
    last = std::max(last, received[i].ns);
  }
  StreamsResult r;
  r.bytes = pairs * size * ops;
  r.seconds = static_cast<double>(last - first) / 1e9;
  r.gbps = r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e9 : 0;
  return r;
}

absl::StatusOr<StreamsResult> RawTcpStreams(const StreamPlan& plan, StreamBuffers* buffers) {
  GDR_RETURN_IF_ERROR(buffers->Reserve(plan.streams, plan.write_bytes));
  return RawTcpStreams(plan.streams, plan.write_bytes, plan.writes, *buffers);
}

}  // namespace gdrbench
