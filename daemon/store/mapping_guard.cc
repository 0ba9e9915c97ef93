#include "daemon/store/mapping_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"

namespace gdr {
namespace {

// The innermost recovery point of this thread, and what the handler saw. Plain (trivially
// constructed) thread_locals in a static library: initial-exec TLS, safe to read in a signal
// handler.
thread_local sigjmp_buf* t_recover = nullptr;
thread_local const void* t_fault = nullptr;

struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  // BUS_ADRERR: an access to a page the mapped object does not have (past the file's end).
  if (sigjmp_buf* env = t_recover; env != nullptr && info->si_code == BUS_ADRERR) {
    t_fault = info->si_addr;
    // SA_NODEFER left SIGBUS unblocked, so jumping out without restoring a mask is right.
    siglongjmp(*env, 1);
  }
  // Not a guarded access: whoever handled SIGBUS before us (a sanitizer reports it), or the
  // default action (the process dies with a core), as if this handler were not there.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

struct FileMapping {
  uint64_t size;
  std::string volume;
  std::string file;
};

ABSL_CONST_INIT absl::Mutex g_registry_mu(absl::kConstInit);

// Begin address -> mapping. Never destroyed: volumes may unregister during static destruction.
std::map<uintptr_t, FileMapping>& Registry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_registry_mu) {
  static auto* m = new std::map<uintptr_t, FileMapping>();
  return *m;
}

}  // namespace

void InstallMappingGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sigemptyset(&sa.sa_mask);
    // SA_NODEFER: the handler leaves by siglongjmp without restoring a signal mask (sigsetjmp
    // with savemask 0 is cheap), so SIGBUS must not be blocked while it runs.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    if (::sigaction(SIGBUS, &sa, &g_previous) != 0) {
      GDR_LOG(kError) << "cannot install the SIGBUS handler for file volumes: "
                      << std::strerror(errno)
                      << "; a file truncated under the daemon will stop it";
    }
  });
}

std::optional<const void*> RunGuarded(absl::FunctionRef<void()> fn) {
  sigjmp_buf env;
  sigjmp_buf* const outer = t_recover;
  if (sigsetjmp(env, /*savemask=*/0) != 0) {
    t_recover = outer;
    return t_fault;
  }
  t_recover = &env;
  // The recovery point must be in place before the first access and cleared only after the
  // last: keep the compiler from moving the stores across the call.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_recover = outer;
  return std::nullopt;
}

void RegisterFileMapping(const void* begin, uint64_t size, const std::string& volume,
                         const std::string& file) {
  absl::MutexLock lock(&g_registry_mu);
  Registry()[reinterpret_cast<uintptr_t>(begin)] = FileMapping{size, volume, file};
}

void UnregisterFileMapping(const void* begin) {
  absl::MutexLock lock(&g_registry_mu);
  Registry().erase(reinterpret_cast<uintptr_t>(begin));
}

absl::Status MappingFaultStatus(const void* fault) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(fault);
  absl::MutexLock lock(&g_registry_mu);
  auto it = Registry().upper_bound(at);
  if (it != Registry().begin()) {
    --it;
    if (at - it->first < it->second.size) {
      return absl::DataLossError(absl::StrCat(
          "volume '", it->second.volume, "': its file ", it->second.file,
          " no longer holds offset ", at - it->first,
          " (the file was truncated under the daemon); the op is failed, other volumes are "
          "served"));
    }
  }
  return absl::DataLossError(
      absl::StrFormat("a mapped page at %p is no longer backed by its file", fault));
}

}  // namespace gdr
