#include "daemon/ops/local_flags.h"

#include <grp.h>
#include <pwd.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "common/base/units.h"

namespace gdr {
namespace {

// A uid (or gid) given as a number or a name; the name's lookup result otherwise.
absl::StatusOr<uint32_t> ResolveId(const char* flag, absl::string_view text, bool group) {
  text = absl::StripAsciiWhitespace(text);
  uint32_t id = 0;
  if (absl::SimpleAtoi(text, &id)) return id;
  const std::string name(text);
  std::vector<char> buf(16384);
  if (group) {
    struct group g, *found = nullptr;
    if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) == 0 && found) {
      return found->gr_gid;
    }
  } else {
    struct passwd p, *found = nullptr;
    if (::getpwnam_r(name.c_str(), &p, buf.data(), buf.size(), &found) == 0 && found) {
      return found->pw_uid;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", name.substr(0, 64), "' is not a ",
                                                 group ? "group" : "user",
                                                 " of this host nor a number"));
}

}  // namespace

void AddLocalFlags(CLI::App& app, LocalFlagValues* v) {
  app.add_option("--local-socket", v->socket,
                 "serve the local transport: processes on this host hand their memory (memfd, "
                 "CUDA IPC handle, VMM descriptor) over on this Unix socket and the daemon "
                 "copies each op's bytes itself (e.g. /run/gdrstored/local.sock); default: off");
  app.add_option("--local-socket-mode", v->socket_mode,
                 "the socket file's mode, octal (default 0600 when only root and the daemon's "
                 "uid are admitted, 0666 when --local-allow-* admit others: their credentials "
                 "decide)");
  app.add_option("--local-allow-uid", v->allow_uids,
                 "users (uid or name) admitted to the local socket besides root and the "
                 "daemon's own uid; repeatable or comma-separated; * admits everyone")
      ->delimiter(',');
  app.add_option("--local-allow-gid", v->allow_gids,
                 "groups (gid or name) whose members by primary gid are admitted to the local "
                 "socket; repeatable or comma-separated")
      ->delimiter(',');
  app.add_option("--local-max-bytes-per-client", v->max_bytes_per_client,
                 "memory one local client may have handed over at once (0: no limit)")
      ->capture_default_str();
  app.add_option("--local-max-regions-per-client", v->max_regions_per_client,
                 "regions one local client may have handed over at once (each is a mapping "
                 "of the daemon)")
      ->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  app.add_option("--local-max-clients", v->max_clients, "local sessions open at once")
      ->capture_default_str()->check(CLI::Range(1u, 65536u));
  app.add_option("--local-fd-reserve", v->fd_reserve,
                 "descriptors no local client may take: a connection that would leave fewer "
                 "free under RLIMIT_NOFILE is refused; auto: an eighth of the limit, 16..1024")
      ->capture_default_str();
  app.add_option("--local-copy-threads", v->copy_threads,
                 "threads copying the local transport's bytes (an op of several split-sizes "
                 "is shared among them)")
      ->capture_default_str()->check(CLI::Range(1u, 256u));
  app.add_option("--local-split-size", v->split_size,
                 "local ops are cut into pieces of at least this size for the copy threads")
      ->capture_default_str();
  app.add_option("--local-lock-piece-size", v->lock_piece_size,
                 "volumes are page-locked for GPU copies in pieces of this size (a multiple of "
                 "4KiB), in the background; a copy runs straight from a locked piece and "
                 "through a pinned bounce buffer before")
      ->capture_default_str();
  app.add_option("--local-lock-threads", v->lock_threads,
                 "threads page-locking volume pieces (the driver may serialise them)")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  app.add_option("--local-lock-idle-ms", v->lock_idle_ms,
                 "a piece is page-locked only once GPU copies have paused this long (0: "
                 "alongside them)")
      ->capture_default_str()->check(CLI::Range(0u, 600000u));
  app.add_option("--local-lock-at-start", v->lock_at_start,
                 "with a GPU on the host, page-lock the volumes served from the start whole, "
                 "in the background (false: only the pieces GPU copies touch)")
      ->capture_default_str();
  app.add_option("--local-lock-budget", v->lock_budget,
                 "most bytes of file-backed volumes page-locked at once (their page-cache pages "
                 "cannot be reclaimed while locked; the rest is copied through bounce "
                 "buffers); auto: half of MemTotal; 0: never")
      ->capture_default_str();
}

absl::StatusOr<LocalOptions> FinishLocalFlags(const CLI::App& app, const LocalFlagValues& v) {
  LocalOptions o;
  if (v.socket.empty()) {
    for (const char* flag :
         {"--local-socket-mode", "--local-allow-uid", "--local-allow-gid",
          "--local-max-bytes-per-client", "--local-max-regions-per-client",
          "--local-max-clients", "--local-fd-reserve", "--local-copy-threads",
          "--local-split-size", "--local-lock-piece-size", "--local-lock-threads",
          "--local-lock-idle-ms", "--local-lock-at-start", "--local-lock-budget"}) {
      if (app.count(flag) > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " configures the local transport, which is off without "
                               "--local-socket"));
      }
    }
    return o;
  }
  if (v.socket.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local-socket: the path is ", v.socket.size(), " bytes, and a Unix socket's may be ",
        sizeof(sockaddr_un::sun_path) - 1, " at most"));
  }
  o.socket_path = v.socket;
  if (!v.socket_mode.empty()) {
    int mode = 0;
    bool ok = v.socket_mode.size() <= 4;
    for (char c : v.socket_mode) ok = ok && c >= '0' && c <= '7';
    if (ok) mode = static_cast<int>(std::stoul(v.socket_mode, nullptr, 8));
    if (!ok || mode > 0777) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--local-socket-mode '", v.socket_mode.substr(0, 16), "' is not an octal mode 0..0777"));
    }
    o.socket_mode = mode;
  }
  for (const std::string& u : v.allow_uids) {
    if (absl::StripAsciiWhitespace(u) == "*") {
      o.allow_any = true;
      continue;
    }
    absl::StatusOr<uint32_t> id = ResolveId("--local-allow-uid", u, /*group=*/false);
    if (!id.ok()) return id.status();
    o.allow_uids.push_back(static_cast<uid_t>(*id));
  }
  for (const std::string& g : v.allow_gids) {
    absl::StatusOr<uint32_t> id = ResolveId("--local-allow-gid", g, /*group=*/true);
    if (!id.ok()) return id.status();
    o.allow_gids.push_back(static_cast<gid_t>(*id));
  }
  absl::StatusOr<uint64_t> max_bytes = ParseSize(v.max_bytes_per_client);
  if (!max_bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local-max-bytes-per-client: ", max_bytes.status().message()));
  }
  o.max_bytes_per_client = *max_bytes;
  absl::StatusOr<uint64_t> split = ParseSize(v.split_size);
  if (!split.ok() || *split < 4096 || *split > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local-split-size must be a size between 4KiB and 1GiB, not '",
        v.split_size.substr(0, 32), "'"));
  }
  o.split_bytes = *split;
  o.max_regions_per_client = v.max_regions_per_client;
  o.max_clients = v.max_clients;
  if (v.fd_reserve != "auto") {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(v.fd_reserve, &n) || n < 1 || n > (1u << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--local-fd-reserve '", v.fd_reserve.substr(0, 32),
                       "' is neither auto nor a number in 1..1048576"));
    }
    o.fd_reserve = n;
  }
  o.copy_threads = v.copy_threads;
  absl::StatusOr<uint64_t> piece = ParseSize(v.lock_piece_size);
  if (!piece.ok() || *piece < 4096 || *piece % 4096 != 0 || *piece > (uint64_t{64} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local-lock-piece-size must be a multiple of 4KiB between 4KiB and 64GiB, not '",
        v.lock_piece_size.substr(0, 32), "'"));
  }
  o.lock_piece_bytes = *piece;
  o.lock_threads = v.lock_threads;
  o.lock_idle_ms = v.lock_idle_ms;
  o.lock_at_start = v.lock_at_start;
  if (v.lock_budget != "auto") {
    absl::StatusOr<uint64_t> budget = ParseSize(v.lock_budget);
    if (!budget.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--local-lock-budget '",
                                                     v.lock_budget.substr(0, 32),
                                                     "' is neither auto nor a size"));
    }
    o.lock_budget_bytes = *budget;
  }
  return o;
}

}  // namespace gdr
