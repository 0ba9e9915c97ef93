// The daemon's simulated store: named volumes of bytes, memory-backed, each filled at start with
// the deterministic pattern (common/pattern.h) so clients can verify what they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace gdr {

struct VolumeSpec {
  std::string name;
  uint64_t size = 0;
};

// "name=SIZE" (SIZE as in ParseSize). INVALID_ARGUMENT on a bad name (1..64 of [A-Za-z0-9_.-])
// or size (0 or unparsable).
absl::StatusOr<VolumeSpec> ParseVolumeSpec(absl::string_view text);
bool IsValidVolumeName(absl::string_view name);

// One volume; owns its mapping. Immutable shape after creation; bytes are written concurrently
// by transfers (last writer wins for overlapping ops, as on a real block device).
class Volume {
 public:
  static absl::StatusOr<std::unique_ptr<Volume>> Create(const VolumeSpec& spec);
  ~Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  std::byte* data() const { return data_; }

 private:
  Volume(std::string name, uint64_t size, std::byte* data)
      : name_(std::move(name)), size_(size), data_(data) {}
  std::string name_;
  uint64_t size_;
  std::byte* data_;
};

// All volumes of the daemon. Lookups are thread-safe (the set is fixed after Create).
class Store {
 public:
  // ALREADY_EXISTS on a repeated name, RESOURCE_EXHAUSTED when memory cannot be mapped.
  static absl::StatusOr<std::unique_ptr<Store>> Create(const std::vector<VolumeSpec>& specs);

  // nullptr when absent.
  const Volume* Find(absl::string_view name) const;
  const std::map<std::string, std::unique_ptr<Volume>, std::less<>>& volumes() const {
    return volumes_;
  }

 private:
  Store() = default;
  std::map<std::string, std::unique_ptr<Volume>, std::less<>> volumes_;
};

}  // namespace gdr
