#include "daemon/transport/local/staged_copy.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

namespace {

// Fills `slot` with n store bytes at `done`: pread from the file (no page faults on the
// mapping), or a guarded memcpy from the mapping for memory volumes.
absl::Status Fill(const StoreBytes& store, uint64_t done, std::byte* slot, size_t n) {
  if (store.fd < 0) {
    const std::byte* page = store.data + done;
    if (std::optional<const void*> f = RunGuarded([&] { std::memcpy(slot, page, n); })) {
      return MappingFaultStatus(*f);
    }
    return absl::OkStatus();
  }
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::pread(store.fd, slot + got, n - got,
                              static_cast<off_t>(store.file_offset + done + got));
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      // The file ends before the volume does (cut short behind the daemon's back): named as
      // the mapping's fault at that byte would be.
      return MappingFaultStatus(store.data + done + got);
    } else if (errno != EINTR) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("reading a volume's file at ", store.file_offset + done + got));
    }
  }
  return absl::OkStatus();
}

// Waits for every slot; the first error among them, or `first` when it is one.
absl::Status WaitAll(StagedDevice& device, size_t slots, absl::Status first) {
  for (size_t s = 0; s < slots; ++s) {
    absl::Status w = device.Wait(static_cast<int>(s));
    if (first.ok() && !w.ok()) first = std::move(w);
  }
  return first;
}

absl::Status ToDevice(StagedDevice& device, uint64_t device_offset, const StoreBytes& store,
                      uint64_t n, std::span<std::byte* const> slots, size_t slot_bytes) {
  const size_t count = slots.size();
  uint64_t done = 0;
  for (size_t k = 0; done < n; ++k) {
    const int s = static_cast<int>(k % count);
    const size_t step = static_cast<size_t>(std::min<uint64_t>(n - done, slot_bytes));
    // The slot's previous copy must have left it before it is filled again.
    absl::Status st = device.Wait(s);
    if (st.ok()) st = Fill(store, done, slots[s], step);
    if (st.ok()) st = device.StartToDevice(s, device_offset + done, slots[s], step);
    if (!st.ok()) return WaitAll(device, count, std::move(st));
    done += step;
  }
  return WaitAll(device, count, absl::OkStatus());
}

absl::Status ToStore(StagedDevice& device, uint64_t device_offset, const StoreBytes& store,
                     uint64_t n, std::span<std::byte* const> slots, size_t slot_bytes) {
  const size_t count = slots.size();
  const uint64_t chunks = (n + slot_bytes - 1) / slot_bytes;
  auto start = [&](uint64_t k) {
    const uint64_t at = k * slot_bytes;
    const size_t step = static_cast<size_t>(std::min<uint64_t>(n - at, slot_bytes));
    return device.StartToHost(static_cast<int>(k % count), slots[k % count], device_offset + at,
                              step);
  };
  // Up to count - 1 copies ahead of the one drained; a slot is started again only after it
  // was drained (one slot: one copy at a time).
  const uint64_t ahead = std::max<uint64_t>(count, 1) - 1;
  uint64_t started = 0;
  for (; started < std::min(chunks, ahead); ++started) {
    if (absl::Status st = start(started); !st.ok()) return WaitAll(device, count, std::move(st));
  }
  for (uint64_t k = 0; k < chunks; ++k) {
    if (started < chunks && started <= k + ahead) {
      if (absl::Status st = start(started); !st.ok()) {
        return WaitAll(device, count, std::move(st));
      }
      ++started;
    }
    const int s = static_cast<int>(k % count);
    if (absl::Status st = device.Wait(s); !st.ok()) return WaitAll(device, count, std::move(st));
    const uint64_t at = k * slot_bytes;
    const size_t step = static_cast<size_t>(std::min<uint64_t>(n - at, slot_bytes));
    std::byte* page = store.data + at;
    const std::byte* b = slots[s];
    if (std::optional<const void*> f = RunGuarded([&] { std::memcpy(page, b, step); })) {
      return WaitAll(device, count, MappingFaultStatus(*f));
    }
  }
  return WaitAll(device, count, absl::OkStatus());
}

}  // namespace

absl::Status StagedCopy(StagedDevice& device, uint64_t device_offset, const StoreBytes& store,
                        uint64_t n, Direction direction, std::span<std::byte* const> slots,
                        size_t slot_bytes) {
  if (slots.empty() || slot_bytes == 0) {
    return absl::InternalError("a staged GPU copy needs at least one bounce slot");
  }
  if (n == 0) return absl::OkStatus();
  return direction == Direction::kStoreToClient
             ? ToDevice(device, device_offset, store, n, slots, slot_bytes)
             : ToStore(device, device_offset, store, n, slots, slot_bytes);
}

}  // namespace gdr
