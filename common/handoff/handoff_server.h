// The receiving end of the handoff protocol (common/wire/handoff_message.h), shared by
// gdrstored's local transport and gdragent: listens on a Unix SOCK_SEQPACKET socket, knows each
// connection by its credentials (SO_PEERCRED), opens one session per connection, imports the
// memory handed over (ImportedRegion) and resolves an op's descriptor (session, key, rkey,
// address, length) to the mapped memory. A connection that closes ends its session: its regions
// leave the table at once, and each is unmapped when the last op using it is done.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/base/fd_passing.h"
#include "common/handoff/imported_region.h"

namespace gdr::handoff {

// One session as the server's callbacks see it.
struct SessionInfo {
  uint64_t id = 0;
  PeerCredentials peer;
  std::string name;  // from HELLO
};

// What refusals call each limit: the setting a user changes (gdragent's --max-clients,
// gdrstored's --local-max-clients), never an internal name. The defaults name the options.
struct HandoffLimitNames {
  std::string max_sessions = "max_sessions";
  std::string max_regions_per_session = "max_regions_per_session";
  std::string max_bytes_per_session = "max_bytes_per_session";
  std::string max_channels_per_session = "max_channels_per_session";
  std::string fd_reserve = "fd_reserve";

  // The names of a server whose settings are flags spelled "--<prefix>max-clients",
  // "--<prefix>max-regions-per-client" and so on (gdragent: no prefix; gdrstored's local
  // transport: "local-").
  static HandoffLimitNames Flags(absl::string_view prefix);
};

// Callbacks run on the connection's own thread (one per connection), never under the server's
// lock, so calls for different sessions may run at once and one session's calls never overlap;
// they may call Resolve and Session, never Stop. on_register runs before the region is in the
// table (Resolve does not find it yet) and before REGISTERED is sent.
struct HandoffServerOptions {
  std::string socket_path;  // created (a stale socket file is replaced); removed on Stop
  mode_t socket_mode = 0660;
  std::string server_name;  // HELLO_OK's server string
  // Decides whether a connecting peer may open a session; its error (PERMISSION_DENIED naming
  // the uid) is sent as the ERROR reply to HELLO and the connection closed. Empty: everyone.
  std::function<absl::Status(const PeerCredentials&)> admit;
  // Per session: regions and registered bytes; past them REGISTER is RESOURCE_EXHAUSTED naming
  // the limit. 0: unlimited bytes. A region holds no descriptor once REGISTERED is sent (its
  // mapping keeps the memory), but each is a mapping of this process.
  uint32_t max_regions_per_session = 4096;
  uint64_t max_bytes_per_session = 0;
  // Regions of all sessions at once: a process's mappings are bounded by vm.max_map_count, and
  // malloc and new threads need some. 0: half of vm.max_map_count.
  uint64_t max_regions = 0;
  // Per session: channels (OPEN_CHANNEL) open at once, each a descriptor of this process for as
  // long as whoever on_channel gave it to keeps it open. Past it OPEN_CHANNEL is
  // RESOURCE_EXHAUSTED naming the limit. 0: 1/16 of the descriptors above the reserve (1..64),
  // from RLIMIT_NOFILE at each OPEN_CHANNEL. A session's channels are shut down when it ends.
  uint32_t max_channels_per_session = 0;
  // Descriptors kept free of clients: a connection or channel that would leave fewer than this
  // under the soft RLIMIT_NOFILE is refused RESOURCE_EXHAUSTED naming it. 0: an eighth of the
  // limit, 16..1024 (DescriptorBudget::AutoReserve).
  uint32_t fd_reserve = 0;
  // Connections served at once, those still before HELLO included; one past it is answered
  // RESOURCE_EXHAUSTED naming the limit and closed.
  uint32_t max_sessions = 1024;
  HandoffLimitNames names;
  // A peer that sends nothing for this long after connecting, or in the middle of a request,
  // is not waited on for ever: HELLO must come within it.
  absl::Duration hello_timeout = absl::Seconds(5);
  // Called after a region is imported and before REGISTERED is sent; an error is the reply
  // (the agent registers the region with its upstream transport here). Empty: nothing.
  std::function<absl::Status(const SessionInfo&, const std::shared_ptr<ImportedRegion>&)>
      on_register;
  // The server's end of the socket pair OPEN_CHANNEL made (connected SOCK_STREAM; the other
  // end goes back in CHANNEL_OPEN). The callee owns it; the server counts it against the
  // session's channels until it is closed, and shuts the socket down when the session ends.
  // Empty: OPEN_CHANNEL is UNIMPLEMENTED ("this server takes ops over gRPC, not a channel").
  std::function<absl::Status(const SessionInfo&, ScopedFd)> on_channel;
  // Called once when a session ends (its regions have left the table).
  std::function<void(const SessionInfo&)> on_session_end;
};

struct HandoffStats {
  uint64_t sessions = 0;        // open now
  uint64_t regions = 0;         // in the table now
  uint64_t bytes = 0;           // registered now
  uint64_t sessions_total = 0;  // opened since start
  uint64_t refused = 0;         // connections or requests answered with an error
};

class HandoffServer {
 public:
  // Binds and listens, then serves on its own threads. The bind's error (naming the path)
  // otherwise.
  static absl::StatusOr<std::unique_ptr<HandoffServer>> Start(HandoffServerOptions options);
  ~HandoffServer();  // Stop()

  // The region of `session` whose rkey is `rkey`, if `key` is the session's key (compared in
  // constant time) and [address, address + length) lies inside it, and it is writable when
  // `need_write`. PERMISSION_DENIED for an unknown session or a wrong key (the same message,
  // so a guess learns nothing), INVALID_ARGUMENT naming the rkey or the range otherwise. The
  // reference keeps the memory mapped until dropped. Thread-safe; never blocks on I/O.
  absl::StatusOr<std::shared_ptr<const ImportedRegion>> Resolve(uint64_t session,
                                                                absl::string_view key,
                                                                uint32_t rkey, uint64_t address,
                                                                uint64_t length,
                                                                bool need_write) const;

  // The session's credentials and name; NOT_FOUND once it has ended.
  absl::StatusOr<SessionInfo> Session(uint64_t session) const;

  // Closes the listener and every session. Idempotent.
  void Stop();
  HandoffStats stats() const;
  const std::string& socket_path() const;

 private:
  class Impl;
  explicit HandoffServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gdr::handoff
