// TLS for gdrstored's gRPC port with certificates replaced while it serves. gRPC 1.51's public C++
// API takes server certificates only from a CertificateProviderInterface, and the one that reloads
// (FileWatcherCertificateProvider) re-reads paths every N seconds without checking what it reads.
// So the daemon never points it at the operator's files: it checks a file set (PEM parses, key
// matches certificate, not expired) and only then copies it into a private staging directory the
// provider watches, switching generations with one rename of a symlink. A broken or half-written
// set is refused with a log line and never reaches gRPC; the previous one keeps serving. Handshakes
// after the switch use the new certificate; connections already open keep theirs until they close.
#pragma once

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/grpc/tls_material.h"
#include "common/process/file_watcher.h"
#include "daemon/ops/tls_flags.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class TlsReloader {
 public:
  // Checks the files of `settings` (which must have TLS enabled), stages them under
  // $RUNTIME_DIRECTORY (else $TMPDIR, else /tmp) in a fresh 0700 directory, and builds the provider
  // that watches the staged copy every second. Errors name the file and what is wrong (see
  // TlsMaterial::Load), or the staging directory that cannot be written. An expired or not yet
  // valid certificate is served with a warning (see the .cc for why).
  static absl::StatusOr<std::unique_ptr<TlsReloader>> Create(const TlsSettings& settings);
  // Stops the watcher and removes the staging directory. Destroy after the server.
  ~TlsReloader();
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  // Server credentials over the staged files: client certificates required and verified when
  // settings.client_ca is set, not requested otherwise.
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }

  // Re-reads the files `settings` names (paths may differ from the running ones). OK when the new
  // set is staged or is the one already served; otherwise the running set stays and the error says
  // why (also when TLS or mTLS would be switched on or off: that needs a restart). `why` ("SIGHUP",
  // "file change") goes into the log line. Thread-safe.
  absl::Status Reload(const TlsSettings& settings, const std::string& why);

  // Starts a thread that checks the source files every `interval` (inode, size, mtime, ctime) and
  // reloads when one changed. Stopped by the destructor.
  void StartWatching(absl::Duration interval);

  // What GetInfo reports. Thread-safe.
  gdrstore::v1::TlsInfo Info() const;
  // "TLS (mTLS: client certificates required), certificate CN=..., valid ..".
  std::string Describe() const;

 private:
  using Stamp = FileStamp;  // a source file's identity and version
  TlsReloader(TlsSettings settings, std::string dir)
      : settings_(std::move(settings)), dir_(std::move(dir)) {}
  static std::vector<Stamp> StampsOf(const TlsSettings& s);
  // Checks the files of `s`; an expired certificate is an error when `refuse_expired`.
  static absl::StatusOr<TlsMaterial> Check(const TlsSettings& s, bool refuse_expired);
  // Writes `m` as the next generation and points `current` at it.
  absl::Status StageLocked(const TlsMaterial& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watch(absl::Duration interval);

  mutable absl::Mutex mu_;
  TlsSettings settings_ ABSL_GUARDED_BY(mu_);
  std::vector<Stamp> stamps_ ABSL_GUARDED_BY(mu_);
  TlsMaterial served_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The staged files' mtime, strictly increasing per generation (see StageLocked).
  int64_t last_mtime_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  const std::string dir_;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace gdr
