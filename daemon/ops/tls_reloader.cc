#include "daemon/ops/tls_reloader.h"

#include <fcntl.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"

namespace gdr {
namespace {

// How often gRPC re-reads the staged copy. Its smallest interval; staging is what decides when
// something new is there to read.
constexpr unsigned kProviderRefreshSeconds = 1;

// The directory the staging directory goes into: systemd's RuntimeDirectory= when the unit has one,
// else $TMPDIR, else /tmp.
std::string StagingParent() {
  if (const char* rt = std::getenv("RUNTIME_DIRECTORY"); rt != nullptr && *rt != '\0') {
    std::string first(rt);
    return first.substr(0, first.find(':'));  // systemd lists several with ':'
  }
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') return tmp;
  return "/tmp";
}

absl::Status WriteFile(const std::string& path, const std::string& text, int64_t mtime) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("staging ", path));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("staging ", path));
    }
    done += static_cast<size_t>(n);
  }
  const timespec times[2] = {{mtime, 0}, {mtime, 0}};
  const int rc = ::futimens(fd, times);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::ErrnoToStatus(err, absl::StrCat("staging ", path, ": futimens"));
  return absl::OkStatus();
}

// Staging directories of daemons that died without cleaning up (SIGKILL, a crash) hold copies of a
// private key: removed at the next start, when their owner (the pid file) is gone.
void RemoveStaleStagingDirs(const std::string& parent) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("gdrstored-tls.", 0) != 0) continue;
    struct stat sb {};
    if (::lstat(e.path().c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != ::geteuid()) {
      continue;
    }
    std::ifstream in(e.path() / "pid");
    pid_t pid = 0;
    if (!(in >> pid) || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
  }
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

}  // namespace

std::vector<TlsReloader::Stamp> TlsReloader::StampsOf(const TlsSettings& s) {
  std::vector<Stamp> out;
  for (const std::string* path : {&s.cert, &s.key, &s.client_ca}) {
    out.push_back(FileStamp::Of(*path));
  }
  return out;
}

absl::StatusOr<TlsMaterial> TlsReloader::Check(const TlsSettings& s, bool refuse_expired) {
  GDR_ASSIGN_OR_RETURN(TlsMaterial m, TlsMaterial::Load({s.cert, s.key, s.client_ca}, "--tls-cert",
                                                        "--tls-key", "--tls-client-ca"));
  const absl::Time now = absl::Now();
  if (m.Expired(now) && refuse_expired) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert ", s.cert, ": certificate expired ", Rfc3339(m.not_after)));
  }
  return m;
}

absl::StatusOr<std::unique_ptr<TlsReloader>> TlsReloader::Create(const TlsSettings& settings) {
  GDR_RETURN_IF_ERROR(CheckTlsFlags(settings));
  if (!settings.enabled()) return absl::InvalidArgumentError("TLS is not configured");
  std::vector<Stamp> stamps = StampsOf(settings);
  // At start an expired certificate is served, with a warning, rather than refused: there is no
  // older one to keep, clients refuse it themselves naming the expiry, and the renewed file is
  // picked up when it lands without a restart (a daemon that exits instead would restart in a loop
  // until someone renews it by hand). On reload an expired set is refused: the one being served is
  // kept.
  GDR_ASSIGN_OR_RETURN(TlsMaterial m, Check(settings, /*refuse_expired=*/false));
  const absl::Time now = absl::Now();
  if (m.Expired(now)) {
    GDR_LOG(kWarning) << "--tls-cert " << settings.cert << ": certificate EXPIRED "
                      << Rfc3339(m.not_after)
                      << "; serving it anyway until a renewed file replaces it, clients will "
                         "refuse it";
  } else if (m.NotYetValid(now)) {
    GDR_LOG(kWarning) << "--tls-cert " << settings.cert << ": certificate not valid before "
                      << Rfc3339(m.not_before) << " (is the clock right?)";
  }
  const std::string parent = StagingParent();
  RemoveStaleStagingDirs(parent);
  std::string tmpl = parent + "/gdrstored-tls.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("TLS staging directory ", tmpl));
  }
  std::unique_ptr<TlsReloader> r(new TlsReloader(settings, tmpl));
  GDR_RETURN_IF_ERROR(
      WriteFile(tmpl + "/pid", absl::StrCat(::getpid(), "\n"), absl::ToUnixSeconds(absl::Now())));
  {
    absl::MutexLock lock(&r->mu_);
    r->stamps_ = std::move(stamps);
    GDR_RETURN_IF_ERROR(r->StageLocked(m));
    r->served_ = std::move(m);
  }
  const std::string current = r->dir_ + "/current/";
  // The provider reads the staged files once here, so the first handshake already has them.
  r->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      current + "key.pem", current + "cert.pem", settings.mutual() ? current + "ca.pem" : "",
      kProviderRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(r->provider_);
  options.watch_identity_key_cert_pairs();
  if (settings.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  r->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (r->credentials_ == nullptr) return absl::InternalError("gRPC refused the TLS options");
  return r;
}

TlsReloader::~TlsReloader() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  credentials_.reset();
  provider_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::Status TlsReloader::StageLocked(const TlsMaterial& m) {
  // A number is used once, even by a generation that fails half-way (its leftovers go with the
  // cleanup two generations later).
  const uint64_t gen = ++generation_;
  const std::string name = absl::StrCat("gen-", gen);
  const std::string gdir = absl::StrCat(dir_, "/", name);
  if (::mkdir(gdir.c_str(), 0700) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("TLS staging directory ", gdir));
  }
  // gRPC's file watcher reads key and certificate as two files and re-reads when their modification
  // times (whole seconds) changed while it read: every generation gets a later second than the
  // last, so a read that straddles the switch below is always noticed.
  const int64_t mtime = std::max<int64_t>(absl::ToUnixSeconds(absl::Now()), last_mtime_ + 1);
  GDR_RETURN_IF_ERROR(WriteFile(gdir + "/cert.pem", m.cert_pem, mtime));
  GDR_RETURN_IF_ERROR(WriteFile(gdir + "/key.pem", m.key_pem, mtime));
  if (!m.ca_pem.empty()) GDR_RETURN_IF_ERROR(WriteFile(gdir + "/ca.pem", m.ca_pem, mtime));
  const std::string link_tmp = dir_ + "/current.tmp";
  ::unlink(link_tmp.c_str());
  if (::symlink(name.c_str(), link_tmp.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("TLS staging: symlink ", link_tmp));
  }
  if (::rename(link_tmp.c_str(), (dir_ + "/current").c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("TLS staging: rename ", link_tmp));
  }
  last_mtime_ = mtime;
  // The generation before the previous one: no read can still be going through it, since the
  // provider reads the files once a second, each read a few microseconds (and a read that fails
  // keeps the credentials it had until the next one).
  if (gen > 2) {
    std::error_code ec;
    std::filesystem::remove_all(absl::StrCat(dir_, "/gen-", gen - 2), ec);
  }
  return absl::OkStatus();
}

absl::Status TlsReloader::Reload(const TlsSettings& settings, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto refuse = [&](const absl::Status& s) {
    ++refused_;
    GDR_LOG(kError) << "TLS (" << why << "): new certificate files refused, still serving "
                    << served_.Describe() << ": " << s.message();
    return s;
  };
  if (!settings.enabled() || settings.mutual() != settings_.mutual()) {
    return refuse(absl::FailedPreconditionError("switching TLS or mTLS on or off needs a restart"));
  }
  std::vector<Stamp> stamps = StampsOf(settings);
  absl::StatusOr<TlsMaterial> m = Check(settings, /*refuse_expired=*/true);
  settings_ = settings;
  stamps_ = std::move(stamps);
  if (!m.ok()) return refuse(m.status());
  if (m->cert_pem == served_.cert_pem && m->key_pem == served_.key_pem &&
      m->ca_pem == served_.ca_pem) {
    return absl::OkStatus();
  }
  if (absl::Status s = StageLocked(*m); !s.ok()) return refuse(s);
  ++reloads_;
  served_ = *std::move(m);
  GDR_LOG(kInfo) << "TLS (" << why << "): now serving " << served_.Describe()
                 << (settings_.mutual() ? ", client CA from " + settings_.client_ca : "")
                 << "; new connections use it, open ones keep theirs";
  return absl::OkStatus();
}

void TlsReloader::StartWatching(absl::Duration interval) {
  watcher_ = std::thread([this, interval] { Watch(interval); });
}

void TlsReloader::Watch(absl::Duration interval) {
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    TlsSettings settings;
    {
      absl::MutexLock lock(&mu_);
      if (StampsOf(settings_) == stamps_) continue;
      settings = settings_;
    }
    // Errors are logged by Reload; a half-written set is tried again on its next change.
    Reload(settings, "file change").IgnoreError();
  }
}

gdrstore::v1::TlsInfo TlsReloader::Info() const {
  absl::MutexLock lock(&mu_);
  gdrstore::v1::TlsInfo info;
  info.set_enabled(true);
  info.set_client_certificate_required(settings_.mutual());
  info.set_certificate_subject(served_.subject);
  info.set_certificate_not_after(Rfc3339(served_.not_after));
  info.set_reloads(reloads_);
  info.set_refused(refused_);
  return info;
}

std::string TlsReloader::Describe() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat(settings_.mutual() ? "mTLS (client certificates required, CA " : "TLS",
                      settings_.mutual() ? settings_.client_ca + ")" : "", ", certificate ",
                      served_.Describe());
}

}  // namespace gdr
