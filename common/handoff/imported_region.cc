#include "common/handoff/imported_region.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/cuda/gpu_ipc.h"

namespace gdr::handoff {
namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// The descriptor must be a memfd sealed against shrinking: a mapping of a file the client
// could truncate afterwards would raise SIGBUS in this process on the next access.
absl::Status CheckMemfd(int fd, const Register& r) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, "fstat of the region's memfd");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor of a host-memfd region is not a memfd (it is ", FileTypeName(st.st_mode),
        ")"));
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor of a host-memfd region is not a memfd (F_GET_SEALS: ", strerror(errno),
        "); create the buffer with memfd_create(MFD_ALLOW_SEALING)"));
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "the memfd is not sealed with F_SEAL_SHRINK: a memfd that can shrink after registering "
        "would fault the server; add it with fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)");
  }
  if (r.writable && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) {
    return absl::InvalidArgumentError(
        "the memfd is sealed against writes but the region is registered writable");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (r.offset > file_size || r.size > file_size - r.offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the region (offset %u + size %u) lies past the end of the memfd (%u bytes)", r.offset,
        r.size, file_size));
  }
  return absl::OkStatus();
}

// The staged chunks of a gpu-vmm-chunks REGISTER, checked against what it says they hold.
absl::StatusOr<std::vector<cuda::VmmChunk>> ChunksOf(const std::vector<StagedChunk>& chunks,
                                                     const Register& r) {
  if (chunks.empty()) {
    return absl::InvalidArgumentError(
        "REGISTER of gpu-vmm-chunks memory with no REGISTER_CHUNK staged before it");
  }
  std::vector<cuda::VmmChunk> out;
  out.reserve(chunks.size());
  uint64_t total = 0;
  for (const StagedChunk& c : chunks) {
    if (!c.fd.valid() || c.size == 0 || c.size > UINT64_MAX - total) {
      return absl::InvalidArgumentError("a staged chunk without a descriptor or a size");
    }
    total += c.size;
    out.push_back(cuda::VmmChunk{c.fd.get(), c.size});
  }
  if (total != r.allocation_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "REGISTER of gpu-vmm-chunks memory says its allocations hold %u bytes; the %u chunks "
        "staged hold %u",
        r.allocation_size, chunks.size(), total));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ImportedRegion>> ImportedRegion::Import(
    const Register& r, ScopedFd fd, uint32_t rkey, std::vector<StagedChunk> chunks) {
  if (r.size == 0) return absl::InvalidArgumentError("a region of 0 bytes");
  if (r.kind != MemoryKind::kGpuVmmChunks && !chunks.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a %s region takes no staged chunks (%u given)", MemoryKindName(r.kind), chunks.size()));
  }
  if (r.address + r.size < r.address) {
    return absl::InvalidArgumentError("the region's address + size wraps around");
  }
  std::shared_ptr<ImportedRegion> region(new ImportedRegion());
  region->kind_ = r.kind;
  region->address_ = r.address;
  region->size_ = r.size;
  region->rkey_ = rkey;
  region->writable_ = r.writable;
  switch (r.kind) {
    case MemoryKind::kHostMemfd: {
      if (!fd.valid()) return absl::InvalidArgumentError("a host-memfd region without its memfd");
      GDR_RETURN_IF_ERROR(CheckMemfd(fd.get(), r));
      const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      const uint64_t map_offset = r.offset & ~(page - 1);
      const uint64_t lead = r.offset - map_offset;
      if (r.size > SIZE_MAX - lead) return absl::InvalidArgumentError("the region is too large");
      const size_t len = static_cast<size_t>(lead + r.size);
      const int prot = PROT_READ | (r.writable ? PROT_WRITE : 0);
      void* p = ::mmap(nullptr, len, prot, MAP_SHARED, fd.get(), static_cast<off_t>(map_offset));
      if (p == MAP_FAILED) {
        const int e = errno;
        if (e == EACCES || e == EPERM) {
          return absl::InvalidArgumentError(absl::StrCat(
              "cannot map the memfd ", r.writable ? "read-write" : "read-only",
              " (mmap: ", strerror(e), "); a writable region needs a memfd opened read-write"));
        }
        return absl::ErrnoToStatus(e, "mmap of the region's memfd");
      }
      region->map_ = p;
      region->map_len_ = len;
      region->host_ = static_cast<std::byte*>(p) + lead;
      region->source_ = r;
      region->source_fd_ = std::move(fd);
      return region;
    }
    case MemoryKind::kGpuIpc:
    case MemoryKind::kGpuVmmFd:
    case MemoryKind::kGpuVmmChunks: {
      if (r.allocation_size < r.offset || r.size > r.allocation_size - r.offset) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "the region (offset %u + size %u) lies past the GPU allocation's %u bytes", r.offset,
            r.size, r.allocation_size));
      }
      absl::StatusOr<std::unique_ptr<cuda::ImportedGpuMemory>> gpu;
      if (r.kind == MemoryKind::kGpuIpc) {
        gpu = cuda::ImportedGpuMemory::OpenIpcHandle(r.ipc_handle, r.gpu, r.allocation_size);
      } else if (r.kind == MemoryKind::kGpuVmmChunks) {
        absl::StatusOr<std::vector<cuda::VmmChunk>> pieces = ChunksOf(chunks, r);
        if (!pieces.ok()) return pieces.status();
        gpu = cuda::ImportedGpuMemory::ImportVmmChunks(*pieces, r.gpu, r.allocation_size);
      } else {
        if (!fd.valid()) {
          return absl::InvalidArgumentError("a gpu-vmm-fd region without its descriptor");
        }
        gpu = cuda::ImportedGpuMemory::ImportVmmFd(fd.get(), r.gpu, r.allocation_size);
      }
      if (!gpu.ok()) return gpu.status();
      if ((*gpu)->size() < r.offset + r.size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "the region (offset %u + size %u) lies past the %u bytes the driver mapped", r.offset,
            r.size, (*gpu)->size()));
      }
      region->gpu_ = *std::move(gpu);
      region->gpu_offset_ = r.offset;
      region->source_ = r;
      region->source_fd_ = std::move(fd);
      region->source_chunks_ = std::move(chunks);
      return region;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown memory kind %u", static_cast<unsigned>(r.kind)));
}

ImportedRegion::~ImportedRegion() {
  if (map_ != nullptr) ::munmap(map_, map_len_);
}

uint64_t ImportedRegion::device_ptr() const { return gpu_ ? gpu_->ptr() + gpu_offset_ : 0; }

int ImportedRegion::gpu_ordinal() const { return gpu_ ? gpu_->ordinal() : -1; }

}  // namespace gdr::handoff
