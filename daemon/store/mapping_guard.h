// Touching a file-backed volume's mapping safely when its file may have shrunk under it: a page
// past the file's end raises SIGBUS on access, which would kill the daemon and every volume and
// client with it. Code that copies into or out of such a mapping runs the copy guarded; a
// SIGBUS on that thread inside the copy returns to it as an error instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace gdr {

// Installs the process's SIGBUS handler, once (later calls do nothing; thread-safe). A SIGBUS
// outside a guarded region goes to the handler that was installed before (a sanitizer's), or
// else takes its default action: the process dies, as it should for a fault nobody expected.
void InstallMappingGuard();

// Runs `fn` with a recovery point for SIGBUS on the calling thread (nesting allowed). Returns
// nullopt when `fn` ran to its end, or the faulting address when it touched a page that no
// file backs; then `fn` was abandoned where it faulted (siglongjmp). So `fn` must, wherever it
// can touch the mapping, hold no lock and have no live object that needs its destructor run:
// plain copies (memcpy, recv into the mapping, a buffered reader's copy out of its buffer).
// InstallMappingGuard must have run (Volume::Create does it for file volumes).
std::optional<const void*> RunGuarded(absl::FunctionRef<void()> fn);

// Which file mapping a fault belongs to, for the error: volumes register their file mappings
// (Volume::Create) and unregister them before unmapping (~Volume). Thread-safe.
void RegisterFileMapping(const void* begin, uint64_t size, const std::string& volume,
                         const std::string& file);
void UnregisterFileMapping(const void* begin);

// DATA_LOSS naming the volume, its file and the offset of `fault` when it lies in a registered
// file mapping; DATA_LOSS with the bare address otherwise.
absl::Status MappingFaultStatus(const void* fault);

}  // namespace gdr
