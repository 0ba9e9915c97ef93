// Fuzzes the volume spec parser (daemon/store/store.h ParseVolumeSpec), what --volume and the
// config file's `volume = [...]` go through. Properties: it never crashes; an accepted spec has
// a valid name, a nonzero size, an absolute file path or none, media figures in range and a
// repeat that divides a memory volume's size or none; printed back in the documented syntax it
// parses to the same spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/store/store.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::string Print(const gdr::VolumeSpec& s) {
  std::string text = absl::StrCat(s.name, "=", s.size);
  if (!s.file.empty()) absl::StrAppend(&text, ",file=", s.file);
  const std::string media = gdr::FormatMediaSettings(s.media);
  if (media != "off") absl::StrAppend(&text, ",", media);
  if (s.repeat != 0) absl::StrAppend(&text, ",repeat=", s.repeat);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gdr::VolumeSpec> spec = gdr::ParseVolumeSpec(text);
  if (!spec.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(spec.status()));
    return 0;
  }
  GDR_FUZZ_CHECK(gdr::IsValidVolumeName(spec->name));
  GDR_FUZZ_CHECK(spec->size > 0);
  GDR_FUZZ_CHECK(spec->file.empty() || spec->file.front() == '/');
  GDR_FUZZ_CHECK(spec->media.latency_us <= 60'000'000);
  GDR_FUZZ_CHECK(spec->media.p99_us == 0 || spec->media.p99_us >= spec->media.latency_us);
  GDR_FUZZ_CHECK(spec->repeat == 0 || (spec->file.empty() && spec->size % spec->repeat == 0 &&
                                       spec->size / spec->repeat <= gdr::kMaxRepeatPeriods));
  absl::StatusOr<gdr::VolumeSpec> again = gdr::ParseVolumeSpec(Print(*spec));
  GDR_FUZZ_CHECK(again.ok());
  GDR_FUZZ_CHECK(again->name == spec->name && again->size == spec->size &&
                 again->file == spec->file && again->media == spec->media &&
                 again->repeat == spec->repeat);
  return 0;
}
