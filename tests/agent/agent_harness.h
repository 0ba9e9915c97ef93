// The agent suites' harness: starts the real gdragent binary against a real gdrstored, and
// plays a client of it the way a client library does: a session on the agent's socket, memory
// handed over as a sealed memfd, and a gRPC channel over a socketpair whose other end the agent
// serves on (OPEN_CHANNEL). Shared by the test process and its child peer (agent_peer.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/socket.h"
#include "common/handoff/handoff_client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "tests/integration/child_process.h"

namespace gdr::agent::test {

// The gdragent binary the harness starts, for tests that run it themselves (`gdragent health`).
std::string AgentBinary();

// A running gdragent, its socket in a scratch directory open to every uid (mode 0755, socket
// 0666), so that a child running as another uid reaches it and is judged by the allowlist.
class AgentProcess {
 public:
  // Spawns GDR_GDRAGENT_BIN with --socket DIR/agent.sock --socket-mode 0666 --daemon `daemon`
  // (none when empty: `args` names the daemons) plus `args`; ready once a session can be opened on the socket (within `timeout`). Its
  // stderr in the error when it exits or never gets ready. `dir`: reuse that directory's socket
  // path (a restart), else a fresh one.
  // `env`: NAME=value added to its environment (NOTIFY_SOCKET, WATCHDOG_USEC).
  static absl::StatusOr<std::unique_ptr<AgentProcess>> Start(
      const std::string& daemon, const std::vector<std::string>& args,
      std::shared_ptr<integ::TempDir> dir = nullptr, absl::Duration timeout = absl::Seconds(30),
      const std::vector<std::string>& env = {});
  ~AgentProcess();  // SIGTERM, then SIGKILL if it has not exited in 20 s

  pid_t pid() const { return child_->pid(); }
  const std::string& socket_path() const { return socket_; }
  std::shared_ptr<integ::TempDir> dir() const { return dir_; }
  absl::Status Signal(int sig) { return child_->Signal(sig); }
  absl::StatusOr<int> Wait(absl::Duration timeout) { return child_->Wait(timeout); }
  bool Running() { return child_->Running(); }
  std::string Stderr() const;

 private:
  AgentProcess() = default;
  std::shared_ptr<integ::TempDir> dir_;
  std::unique_ptr<integ::ChildProcess> child_;
  std::string socket_;
};

// Memory as a client library makes it for the agent: a memfd sealed against shrinking, mapped
// read-write here. Unmapped and closed on destruction.
class SharedMemory {
 public:
  static absl::StatusOr<std::unique_ptr<SharedMemory>> Create(size_t size);
  ~SharedMemory();
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }

 private:
  SharedMemory() = default;
  ScopedFd fd_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// One client of the agent: its session, and the channel it opened.
struct AgentClient {
  std::unique_ptr<handoff::HandoffClient> session;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<gdrstore::v1::GdrStore::Stub> stub;

  // HELLO, then OPEN_CHANNEL: the agent hands back its socket pair's other end, gRPC runs on it.
  static absl::StatusOr<AgentClient> Connect(const std::string& socket_path,
                                             const std::string& name);
  // Hands `memory` (all of it) over; the rkey.
  absl::StatusOr<uint32_t> Register(const SharedMemory& memory, bool writable = true);
  // The descriptor of [offset, offset + length) of `memory` registered under `rkey`.
  gdrstore::v1::RemoteBuffer Describe(const SharedMemory& memory, uint32_t rkey, uint64_t offset,
                                      uint64_t length) const;
  // Unary Write (store -> memory) / Read (memory -> store) with a deadline; the call's status.
  absl::StatusOr<gdrstore::v1::OpResponse> Get(const std::string& volume, uint64_t volume_offset,
                                               const gdrstore::v1::RemoteBuffer& buffer,
                                               bool crc32c = false);
  absl::StatusOr<gdrstore::v1::OpResponse> Put(const std::string& volume, uint64_t volume_offset,
                                               const gdrstore::v1::RemoteBuffer& buffer);
  absl::StatusOr<gdrstore::v1::GetStatsResponse> Stats();
  absl::StatusOr<gdrstore::v1::GetInfoResponse> Info();
};

}  // namespace gdr::agent::test
