// Every volume of the daemon, from its making to its deletion: the configuration's at start-up
// and on SIGHUP, and those of Admin CreateVolume / DeleteVolume. Checks a request against the
// limits (--max-volumes, the memory available, the writable --volume-dir's free space), makes
// the volume through the store (whose hooks register it with every transport running) and gives
// it a media model and counters; or takes one away. Making a volume maps and fills it, which
// takes time, so requests run one at a time on the catalog's own thread, never on a gRPC one.
// Whoever follows the set of volumes (the daemon's cluster entry) hears of each change through
// one hook.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/observe/stats.h"
#include "daemon/sim/media_timing.h"
#include "daemon/store/store.h"
#include "daemon/store/volume_dir.h"
#include "gdrstore/v1/admin.pb.h"

namespace gdr {

struct VolumeCatalogOptions {
  uint32_t max_volumes = 4096;
  std::optional<VolumeDir> writable_dir;  // where file volumes made at run time go
  // Memory kept free besides a new memory volume (the daemon's own, the host's).
  uint64_t memory_reserve = uint64_t{256} << 20;
  // /proc/meminfo, read for MemAvailable (tests point it elsewhere).
  std::string meminfo = "/proc/meminfo";
  // Run on the catalog's thread after each volume made or deleted, once the store shows the
  // change and before the request is answered. Must not block on the network; may be empty.
  std::function<void()> volumes_changed;
};

class VolumeCatalog {
 public:
  // All must outlive the catalog.
  VolumeCatalog(Store* store, MediaTiming* media, DaemonStats* stats, VolumeCatalogOptions options);
  // Ends the thread after the request it runs; queued ones are answered UNAVAILABLE.
  ~VolumeCatalog();

  struct Made {
    std::shared_ptr<const Volume> volume;
    bool created = false;
  };
  // `done` runs once on the catalog's thread (or inline when the catalog is stopping).
  void Create(const gdrstore::v1::CreateVolumeRequest& request, std::string who,
              std::function<void(absl::StatusOr<Made>)> done);
  void Delete(const gdrstore::v1::DeleteVolumeRequest& request, std::string who,
              std::function<void(absl::Status)> done);

  // The configuration's volumes, on SIGHUP: made and deleted as Create and Delete do (the same
  // checks, limits and hook), on the catalog's thread, the caller waiting for the answer.
  // `spec` comes checked from the configuration's parser and may name a file anywhere (--volume
  // file=) or in any --volume-dir. A volume's file is never deleted here. UNAVAILABLE when the
  // catalog is stopping.
  absl::StatusOr<Made> CreateConfigured(const VolumeSpec& spec, const std::string& who);
  // The configuration's volumes at start-up, in order, each made as CreateConfigured makes it
  // but for the room checks: the configuration's parser counted them against --max-volumes,
  // and a start is not refused for memory or disk the host may yet find (a volume that cannot
  // be mapped or filled still fails it). Stops at the first error, which it returns.
  absl::Status CreateAtStart(const std::vector<VolumeSpec>& specs);
  absl::Status DeleteConfigured(const std::string& name, const std::string& who);

  // What a request asks for, checked (no limit but the fields'): INVALID_ARGUMENT naming the
  // field; FAILED_PRECONDITION for a file without a writable directory.
  absl::StatusOr<VolumeSpec> SpecOf(const gdrstore::v1::CreateVolumeRequest& request) const;

 private:
  absl::StatusOr<Made> RunCreate(const gdrstore::v1::CreateVolumeRequest& request,
                                 const std::string& who);
  // RunCreate past the request's own checks: the name free, the room there (when
  // `check_room`), then the volume.
  absl::StatusOr<Made> Make(const VolumeSpec& spec, const std::string& who,
                            bool check_room = true);
  absl::Status RunDelete(const gdrstore::v1::DeleteVolumeRequest& request, const std::string& who);
  // Runs `run` on the catalog's thread and waits for it; UNAVAILABLE when stopping.
  absl::Status RunWaiting(const std::function<void()>& run);
  // The room left for `spec`: RESOURCE_EXHAUSTED naming the limit it would pass.
  absl::Status CheckRoom(const VolumeSpec& spec) const;
  void Post(std::function<void()> run, std::function<void()> abandon);
  void Work();

  Store* const store_;
  MediaTiming* const media_;
  DaemonStats* const stats_;
  const VolumeCatalogOptions options_;
  absl::Mutex mu_;
  std::deque<std::pair<std::function<void()>, std::function<void()>>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

// MemAvailable of a /proc/meminfo text, bytes; nullopt when it has none.
std::optional<uint64_t> MemAvailable(const std::string& meminfo_text);

}  // namespace gdr
