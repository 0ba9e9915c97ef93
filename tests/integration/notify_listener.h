// Plays systemd's side of the notify protocol for tests: binds a real AF_UNIX datagram socket
// (the path a daemon gets as NOTIFY_SOCKET), receives every datagram on a thread and records it
// with its arrival time. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/socket.h"

namespace gdr::integ {

struct NotifyMessage {
  absl::Time at;
  std::string text;  // "READY=1\nSTATUS=..."
  // True when one of its lines is exactly `assignment` (e.g. "READY=1").
  bool Has(const std::string& assignment) const;
  // Value of VAR= in the message, empty when absent.
  std::string Get(const std::string& var) const;
};

class NotifyListener {
 public:
  // Binds `path` (which must not exist). `on_message` (optional) runs on the receive thread for
  // each datagram before it is recorded, so a test can check the world at the moment a state
  // arrives.
  static absl::StatusOr<std::unique_ptr<NotifyListener>> Bind(
      const std::string& path, std::function<void(const NotifyMessage&)> on_message = nullptr);
  ~NotifyListener();
  const std::string& path() const { return path_; }

  std::vector<NotifyMessage> messages() const;
  // Waits until a message at index >= `from` has the assignment; its index, or -1 on timeout.
  int WaitFor(const std::string& assignment, size_t from, absl::Duration timeout) const;
  size_t size() const;

 private:
  NotifyListener() = default;
  void Loop();
  std::string path_;
  ScopedFd fd_;
  std::function<void(const NotifyMessage&)> on_message_;
  mutable absl::Mutex mu_;
  std::vector<NotifyMessage> messages_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gdr::integ
