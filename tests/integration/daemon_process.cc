#include "tests/integration/daemon_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace gdr::integ {

// ---- health check ----

absl::StatusOr<bool> HealthCheck(const std::string& address, absl::Duration timeout,
                                 std::shared_ptr<grpc::ChannelCredentials> credentials) {
  auto channel = grpc::CreateChannel(
      address, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  // HealthCheckRequest{service: ""}: field 1, wire type 2, length 0.
  const char request_bytes[] = {0x0a, 0x00};
  grpc::Slice slice(request_bytes, sizeof(request_bytes));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(true);  // a daemon still binding is "not yet", not "refused"
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status s = done.get_future().get();
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("Health/Check: ", s.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("Health/Check: bad response buffer");
  std::string bytes;
  for (const grpc::Slice& sl : slices)
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  // HealthCheckResponse{status: enum field 1}. Absent field = UNKNOWN (0).
  uint64_t status = 0;
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t key = static_cast<uint8_t>(bytes[i++]);
    if (key != 0x08) return absl::InternalError("Health/Check: unexpected response field");
    uint64_t v = 0;
    int shift = 0;
    while (i < bytes.size()) {
      const uint8_t b = static_cast<uint8_t>(bytes[i++]);
      v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    status = v;
  }
  return status == 1;  // SERVING
}

// ---- /proc ----

absl::StatusOr<int> CountOpenFds(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("opendir ", path));
  int n = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

std::string DescribeOpenFds(pid_t pid) {
  std::string out;
  const std::string path = absl::StrCat("/proc/", pid, "/fd");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    std::error_code ec2;
    auto target = std::filesystem::read_symlink(e.path(), ec2);
    absl::StrAppend(&out, e.path().filename().string(), "->", ec2 ? "?" : target.string(), " ");
  }
  return out;
}

absl::StatusOr<uint64_t> ResidentBytes(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v(line);
    if (!absl::ConsumePrefix(&v, "VmRSS:")) continue;
    v = absl::StripAsciiWhitespace(v);
    absl::ConsumeSuffix(&v, "kB");
    v = absl::StripAsciiWhitespace(v);
    uint64_t kb = 0;
    if (!absl::SimpleAtoi(v, &kb)) return absl::InternalError(absl::StrCat("bad VmRSS: ", line));
    return kb * 1024;
  }
  return absl::NotFoundError(absl::StrCat("no VmRSS in ", path));
}

// ---- DaemonProcess ----

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::vector<std::string>& args, absl::Duration ready_timeout) {
  DaemonStart how;
  how.ready_timeout = ready_timeout;
  return Start(args, how);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::vector<std::string>& args, const DaemonStart& how) {
  const absl::Duration ready_timeout = how.ready_timeout;
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create("gdrstored-integ");
  if (!dir.ok()) return dir.status();
  d->dir_ = std::move(*dir);
  const std::string port_file = d->dir_->File("port");
  // $GDR_GDRSTORED_BIN overrides the built path (test binaries carried to another machine).
  const char* bin_env = std::getenv("GDR_GDRSTORED_BIN");
  const std::string bin = bin_env != nullptr && *bin_env != '\0' ? bin_env : GDR_GDRSTORED_BIN;
  std::vector<std::string> argv = {bin, "--listen", how.listen, "--port-file", port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(argv, d->dir_->File("stdout"), d->dir_->File("stderr"));
  if (!child.ok()) return child.status();
  d->child_ = std::move(*child);

  const absl::Time deadline = absl::Now() + ready_timeout;
  // The port file appears (renamed into place) once the server is bound and serving.
  bool died = false;
  const bool have_port = PollUntil(
      [&] {
        if (!d->child_->Running()) {
          died = true;
          return true;
        }
        std::string text = ReadFileOrEmpty(port_file);
        uint32_t port = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0 && port < 65536) {
          d->port_ = static_cast<uint16_t>(port);
          return true;
        }
        return false;
      },
      ready_timeout, absl::Milliseconds(10));
  if (died) {
    return absl::InternalError(absl::StrCat("gdrstored ",
                                            DescribeWaitStatus(d->child_->wait_status()),
                                            " before serving; stderr: ", d->Stderr()));
  }
  if (!have_port) {
    return absl::DeadlineExceededError(absl::StrCat("gdrstored wrote no port file within ",
                                                    absl::FormatDuration(ready_timeout),
                                                    "; stderr: ", d->Stderr()));
  }
  if (!how.health_check) return d;
  // Readiness is what the health service says, not the file.
  absl::Status last;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<bool> serving = HealthCheck(d->address(), left, how.credentials);
    if (serving.ok() && *serving) return d;
    last = serving.ok() ? absl::UnavailableError("health: NOT_SERVING") : serving.status();
    if (!d->child_->Running()) break;
    if (serving.ok()) absl::SleepFor(absl::Milliseconds(10));  // NOT_SERVING: ask again
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "gdrstored on ", d->address(), " not healthy: ", last.ToString(), "; stderr: ", d->Stderr()));
}

DaemonProcess::~DaemonProcess() {
  // The default drain timeout is 10 s; a daemon that takes longer is SIGKILLed by ~ChildProcess.
  if (child_ != nullptr && child_->Running()) (void)Terminate(absl::Seconds(20));
}

std::string DaemonProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::StatusOr<int> DaemonProcess::Terminate(absl::Duration timeout) {
  if (absl::Status s = child_->Signal(SIGTERM); !s.ok()) return s;
  return child_->Wait(timeout);
}

std::string DaemonProcess::Stderr() const { return ReadFileOrEmpty(child_->stderr_path()); }

absl::Status DaemonProcess::Stop() {
  if (absl::Status s = Signal(SIGSTOP); !s.ok()) return s;
  const std::string stat = absl::StrCat("/proc/", pid(), "/stat");
  const bool stopped = PollUntil(
      [&] {
        std::ifstream f(stat);
        const std::string line((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
        const size_t paren = line.rfind(')');  // the state follows the command's ") "
        return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T';
      },
      absl::Seconds(10), absl::Milliseconds(5));
  return stopped ? absl::OkStatus()
                 : absl::DeadlineExceededError(absl::StrCat("gdrstored ", pid(),
                                                            " did not stop within 10 s"));
}

std::unique_ptr<gdrstore::Client> ConnectClient(const DaemonProcess& d, const std::string& token,
                                                bool crc32c) {
  gdrstore::ClientOptions o;
  o.token = token;
  o.crc32c = crc32c;
  return ConnectClient(d, std::move(o));
}

std::unique_ptr<gdrstore::Client> ConnectClient(const DaemonProcess& d,
                                                gdrstore::ClientOptions options) {
  options.daemon_address = d.address();
  auto c = gdrstore::Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

}  // namespace gdr::integ
