// gdrstored's Prometheus endpoint against a real daemon: after a known mix of
// ops a scrape of /metrics over loopback HTTP says what GetStats says (totals,
// per transport, volume and client, errors by code, latency histogram counts),
// passes `promtool check metrics`, counts ops of a token's caller under its
// label, and every metric the shipped Grafana dashboard queries exists. Bad
// --metrics-listen values stop the start with the flag named.
#include <arpa/inet.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gdrstore/client.h"
#include "tests/integration/admin_rpc.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;

// The body of GET /metrics on 127.0.0.1:port, over a plain socket (HTTP/1.0:
// the server closes when done). Fails the test on any transport or HTTP error.
std::string Scrape(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ADD_FAILURE() << "connect 127.0.0.1:" << port << ": " << strerror(errno);
    return "";
  }
  // A bound on a scrape that never ends (a starved endpoint), so the test reports it.
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string reply;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, n);
  const size_t end = reply.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << reply;
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200") || absl::StartsWith(reply, "HTTP/1.0 200"))
      << reply.substr(0, 200);
  return end == std::string::npos ? "" : reply.substr(end + 4);
}

// A scrape, parsed: samples by their series text (`name{labels}`) and families
// by name.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> families;  // name -> type
  double Get(const std::string& series) const {
    auto it = samples.find(series);
    if (it == samples.end()) {
      ADD_FAILURE() << "no sample " << series;
      return -1;
    }
    return it->second;
  }
};

Exposition Parse(const std::string& text) {
  Exposition e;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() == 2) e.families[parts[0]] = parts[1];
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &v)) {
      e.samples[std::string(line.substr(0, space))] = v;
    }
  }
  return e;
}

uint16_t ReadPort(const std::string& path) {
  std::ifstream in(path);
  int port = 0;
  in >> port;
  return static_cast<uint16_t>(port);
}

uint64_t ErrorCount(const v1::OpCounters& c, const std::string& name) {
  for (const auto& e : c.errors())
    if (e.name() == name) return e.count();
  return 0;
}

// `promtool check metrics` on `text`: its result, or nullopt when promtool is
// not installed.
std::optional<ProcessResult> Promtool(const TempDir& dir, const std::string& name,
                                      const std::string& text) {
  if (::access("/usr/bin/promtool", X_OK) != 0) return std::nullopt;
  const std::string file = dir.File(name);
  std::ofstream(file) << text;
  auto r = RunProcess({"/bin/sh", "-c", "exec /usr/bin/promtool check metrics < " + file},
                      dir.path(), name, absl::Seconds(60));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return std::nullopt;
  return *r;
}

class MetricsTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> extra = {}) {
    auto dir = TempDir::Create("gdr-metrics");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    std::vector<std::string> args = {"--volume",
                                     "a=16MiB",
                                     "--volume",
                                     "b=16MiB",
                                     "--rc",
                                     "off",
                                     "--dc",
                                     "off",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--metrics-port-file",
                                     dir_->File("metrics-port")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::Start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    // Written before the gRPC port file the harness waited for.
    metrics_port_ = ReadPort(dir_->File("metrics-port"));
    ASSERT_NE(metrics_port_, 0);
    EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), absl::StrCat("port ", metrics_port_)))
        << daemon_->Stderr();
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  uint16_t metrics_port_ = 0;
};

TEST_F(MetricsTest, ScrapeMatchesGetStatsAndPassesPromtool) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  gdrstore::ClientOptions o;
  o.daemon_address = daemon_->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(1 << 20);
  ASSERT_TRUE(buf.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*c)->Write({"a", i * 4096u, 4096}, **buf).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*c)->Read({"b", i * 65536u, 65536}, **buf).ok());
  EXPECT_EQ((*c)->Write({"a", 16u << 20, 10}, **buf).status().code(),
            absl::StatusCode::kOutOfRange);
  // An injected fault, counted by kind and volume.
  ASSERT_TRUE(SetFault(daemon_->address(), "kind=error,volume=b,count=1,code=ABORTED").ok());
  EXPECT_EQ((*c)->Read({"b", 0, 4096}, **buf).status().code(), absl::StatusCode::kAborted);

  auto s = GetStats(**c);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string text = Scrape(metrics_port_);
  const Exposition m = Parse(text);

  EXPECT_EQ(m.Get("gdrstored_ops_total{direction=\"get\"}"), 5);
  EXPECT_EQ(m.Get("gdrstored_ops_total{direction=\"get\"}"), s->total().write_ops());
  EXPECT_EQ(m.Get("gdrstored_ops_total{direction=\"put\"}"), s->total().read_ops());
  EXPECT_EQ(m.Get("gdrstored_op_bytes_total{direction=\"get\"}"), s->total().write_bytes());
  EXPECT_EQ(m.Get("gdrstored_op_bytes_total{direction=\"put\"}"), 3 * 65536);
  EXPECT_EQ(m.Get("gdrstored_op_errors_total{code=\"OUT_OF_RANGE\"}"), 1);
  EXPECT_EQ(m.Get("gdrstored_faults_injected_total{kind=\"error\",volume=\"b\"}"), 1);
  EXPECT_EQ(m.Get("gdrstored_op_errors_total{code=\"OUT_OF_RANGE\"}"),
            ErrorCount(s->total(), "OUT_OF_RANGE"));
  EXPECT_EQ(m.Get("gdrstored_transport_ops_total{transport=\"tcp\",direction=\"get\"}"), 5);
  EXPECT_EQ(m.Get("gdrstored_transport_ops_total{transport=\"rc\",direction=\"get\"}"), 0);
  EXPECT_EQ(m.Get("gdrstored_volume_ops_total{volume=\"a\",direction=\"get\"}"), 5);
  EXPECT_EQ(m.Get("gdrstored_volume_ops_total{volume=\"a\",direction=\"put\"}"), 0);
  EXPECT_EQ(m.Get("gdrstored_volume_op_bytes_total{volume=\"b\",direction=\"put\"}"), 3 * 65536);
  EXPECT_EQ(m.Get("gdrstored_volume_op_errors_total{volume=\"a\",code=\"OUT_OF_"
                  "RANGE\"}"),
            1);
  EXPECT_EQ(m.samples.count("gdrstored_volume_op_errors_total{volume=\"b\","
                            "code=\"OUT_OF_RANGE\"}"),
            0u);
  EXPECT_EQ(m.Get("gdrstored_inflight_ops"), 0);

  // The caller, counted under its address (no token): in GetStats field 10 and
  // in the scrape.
  ASSERT_EQ(s->clients_size(), 1);
  EXPECT_EQ(s->clients(0).client(), "127.0.0.1");
  EXPECT_EQ(s->clients(0).ops().write_ops(), 5u);
  EXPECT_EQ(s->clients(0).ops().read_bytes(), 3u * 65536);
  EXPECT_EQ(ErrorCount(s->clients(0).ops(), "OUT_OF_RANGE"), 1u);
  EXPECT_EQ(m.Get("gdrstored_client_ops_total{client=\"127.0.0.1\",direction=\"get\"}"), 5);
  EXPECT_EQ(m.Get("gdrstored_client_op_bytes_total{client=\"127.0.0.1\","
                  "direction=\"put\"}"),
            3 * 65536);
  EXPECT_EQ(m.Get("gdrstored_client_op_errors_total{client=\"127.0.0.1\",code="
                  "\"OUT_OF_RANGE\"}"),
            1);

  // Histograms: one observation per successful op, every one at most +Inf,
  // buckets cumulative.
  EXPECT_EQ(m.Get("gdrstored_op_duration_seconds_count{direction=\"get\"}"),
            s->total().write_latency().count());
  EXPECT_EQ(m.Get("gdrstored_op_duration_seconds_bucket{direction=\"get\",le="
                  "\"+Inf\"}"),
            5);
  EXPECT_EQ(m.Get("gdrstored_volume_op_duration_seconds_count{volume=\"b\","
                  "direction=\"put\"}"),
            3);
  EXPECT_EQ(m.Get("gdrstored_transport_op_duration_seconds_count{transport="
                  "\"tcp\",direction=\"put\"}"),
            3);
  EXPECT_GT(m.Get("gdrstored_op_duration_seconds_sum{direction=\"get\"}"), 0);
  double last = 0;
  int buckets = 0;
  for (const auto& [series, v] : m.samples) {
    if (!absl::StartsWith(series, "gdrstored_op_duration_seconds_bucket{direction=\"get\"")) {
      continue;
    }
    ++buckets;
    EXPECT_LE(v, 5) << series;
    last = std::max(last, v);
  }
  EXPECT_EQ(buckets, 29);  // 2^10 .. 2^37 ns, and +Inf
  EXPECT_EQ(last, 5);

  EXPECT_EQ(m.Get("gdrstored_reloads_total"), s->reloads());
  EXPECT_EQ(m.Get("gdrstored_admission_max_inflight_ops"), s->admission().max_inflight_ops());
  EXPECT_EQ(m.Get("gdrstored_admission_inflight_ops"), 0);
  EXPECT_GT(m.Get("gdrstored_uptime_seconds"), 0);
  EXPECT_EQ(m.Get("gdrstored_pool_capacity{transport=\"tcp\"}"),
            s->transports(0).pool().capacity());
  EXPECT_EQ(m.families.at("gdrstored_op_duration_seconds"), "histogram");
  EXPECT_EQ(m.families.at("gdrstored_ops_total"), "counter");
  EXPECT_EQ(m.families.at("gdrstored_inflight_ops"), "gauge");
  EXPECT_EQ(m.families.count("gdrstored_rail_op_bytes_total"),
            1u);  // no rail here: no sample

  std::optional<ProcessResult> good = Promtool(*dir_, "scrape.txt", text);
  if (!good) GTEST_SKIP() << "promtool (Debian package prometheus) is not installed";
  EXPECT_EQ(good->exit_code, 0) << good->Describe() << good->out;
  // promtool does reject what breaks the naming rules: the check above has
  // teeth.
  std::optional<ProcessResult> bad =
      Promtool(*dir_, "bad.txt",
               "# HELP gdrstored_ops counter\n# TYPE gdrstored_ops counter\n"
               "gdrstored_ops 1\n");
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->exit_code, 0) << bad->out;
}

TEST_F(MetricsTest, TokenCallersAreCountedUnderTheirLabel) {
  auto dir = TempDir::Create("gdr-metrics-tokens");
  ASSERT_TRUE(dir.ok());
  const std::string tokens = (*dir)->File("tokens");
  {
    std::ofstream out(tokens);
    out << "gdrstore-metrics-token-alice-0123456789 name=alice\n"
        << "gdrstore-metrics-token-bob-9876543210xy name=bob\n";
  }
  ::chmod(tokens.c_str(), 0600);
  ASSERT_NO_FATAL_FAILURE(StartDaemon({"--token-file", tokens}));
  std::map<std::string, std::unique_ptr<gdrstore::Client>> clients;
  for (const auto& [name, token] : std::vector<std::pair<std::string, std::string>>{
           {"alice", "gdrstore-metrics-token-alice-0123456789"},
           {"bob", "gdrstore-metrics-token-bob-9876543210xy"}}) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    o.token = token;
    auto c = gdrstore::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    clients[name] = std::move(*c);
  }
  auto buf = clients["alice"]->AllocateBuffer(8192);
  ASSERT_TRUE(buf.ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(clients["alice"]->Write({"a", 0, 8192}, **buf).ok());
  auto bbuf = clients["bob"]->AllocateBuffer(4096);
  ASSERT_TRUE(bbuf.ok());
  ASSERT_TRUE(clients["bob"]->Read({"b", 0, 4096}, **bbuf).ok());

  const Exposition m = Parse(Scrape(metrics_port_));
  EXPECT_EQ(m.Get("gdrstored_client_ops_total{client=\"alice\",direction=\"get\"}"), 2);
  EXPECT_EQ(m.Get("gdrstored_client_op_bytes_total{client=\"alice\",direction="
                  "\"get\"}"),
            16384);
  EXPECT_EQ(m.Get("gdrstored_client_ops_total{client=\"bob\",direction=\"put\"}"), 1);
  EXPECT_EQ(m.samples.count("gdrstored_client_ops_total{client=\"127.0.0.1\",direction=\"get\"}"),
            0u);
  // GetStats shows a token's caller its own entry only.
  auto s = GetStats(*clients["bob"]);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->clients_size(), 1);
  EXPECT_EQ(s->clients(0).client(), "bob");
  EXPECT_EQ(s->clients(0).ops().read_ops(), 1u);
}

// Every metric the shipped dashboard's PromQL names is in a scrape of a running
// daemon.
TEST_F(MetricsTest, DashboardQueriesOnlyExportedMetrics) {
  std::ifstream in(GDR_SOURCE_DIR "/deploy/grafana/gdrstored.json");
  ASSERT_TRUE(in) << "deploy/grafana/gdrstored.json";
  std::stringstream json;
  json << in.rdbuf();
  google::protobuf::Struct dashboard;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.str(), &dashboard).ok())
      << "the dashboard is not valid JSON";
  std::vector<std::string> exprs;
  std::function<void(const google::protobuf::Value&)> walk = [&](const google::protobuf::Value& v) {
    if (v.has_struct_value()) {
      for (const auto& [key, field] : v.struct_value().fields()) {
        if (key == "expr" && field.has_string_value()) exprs.push_back(field.string_value());
        walk(field);
      }
    } else if (v.has_list_value()) {
      for (const auto& item : v.list_value().values()) walk(item);
    }
  };
  google::protobuf::Value root;
  *root.mutable_struct_value() = dashboard;
  walk(root);
  ASSERT_GE(exprs.size(), 8u);

  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  // One injected fault, so its family has a sample to be found.
  ASSERT_TRUE(SetFault(daemon_->address(), "kind=error,count=1").ok());
  {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    auto c = gdrstore::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    auto buf = (*c)->AllocateBuffer(4096);
    ASSERT_TRUE(buf.ok());
    EXPECT_FALSE((*c)->Write({"a", 0, 4096}, **buf).ok());
  }
  const Exposition m = Parse(Scrape(metrics_port_));
  const std::regex name_re("gdrstored_[A-Za-z0-9_]+");
  std::set<std::string> checked;
  for (const std::string& expr : exprs) {
    for (std::sregex_iterator it(expr.begin(), expr.end(), name_re), end; it != end; ++it) {
      std::string name = it->str();
      // A histogram's series name its family plus _bucket, _count or _sum.
      for (const char* suffix : {"_bucket", "_count", "_sum"}) {
        const std::string base = std::string(absl::StripSuffix(name, suffix));
        if (base != name && m.families.count(base) && m.families.at(base) == "histogram") {
          name = base;
        }
      }
      checked.insert(name);
      EXPECT_EQ(m.families.count(name), 1u)
          << "the dashboard queries " << name << ", which the daemon does not export: " << expr;
    }
  }
  EXPECT_GE(checked.size(), 8u);
  EXPECT_EQ(checked.count("gdrstored_faults_injected_total"), 1u);
}

// Issue 29: prometheus-cpp's Exposer ran 2 civetweb workers, each held by a connection until
// its request arrived or 30 s passed, so two idle (or half-sent) requests made a scrape wait
// ~30 s and Prometheus (10 s scrape timeout) marked the target down. Now: more idle
// connections than the exposer has workers, half of them with a partial request line, and a
// real scrape still completes within Prometheus' own scrape timeout (a protocol bound, not a
// performance figure: the daemon's kMetricsRequestTimeout is 3 s).
TEST_F(MetricsTest, IdleConnectionsDoNotStarveAScrape) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  constexpr int kIdle = 24;  // more than the exposer's 16 workers
  std::vector<int> idle;
  absl::Cleanup close_idle = [&idle] {
    for (int fd : idle) ::close(fd);
  };
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(metrics_port_);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < kIdle; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
    if (i % 2 == 1) {
      const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
      ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(partial.size()));
    }
  }
  const absl::Time start = absl::Now();
  const std::string body = Scrape(metrics_port_);
  const absl::Duration took = absl::Now() - start;
  EXPECT_NE(body.find("gdrstored_ops_total"), std::string::npos) << body.substr(0, 200);
  EXPECT_LT(took, absl::Seconds(10)) << "a scrape behind " << kIdle << " idle connections";
  // The idle connections were cut off by the request timeout, not left open for good: each
  // one reads end-of-file (or a reset), all within twice Prometheus' scrape timeout.
  const absl::Time cut_by = start + absl::Seconds(20);
  for (int fd : idle) {
    const absl::Duration left = std::max(cut_by - absl::Now(), absl::Milliseconds(1));
    timeval tv = absl::ToTimeval(left);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char c[256];
    ssize_t n;
    while ((n = ::recv(fd, c, sizeof(c), 0)) > 0) {
    }
    EXPECT_TRUE(n == 0 || errno == ECONNRESET) << "recv: " << strerror(errno);
  }
  EXPECT_TRUE(daemon_->Running());
}

TEST(MetricsFlagsTest, BadAddressesStopTheStartNamingTheFlag) {
  auto dir = TempDir::Create("gdr-metrics-flags");
  ASSERT_TRUE(dir.ok());
  // A port taken by someone else: the start fails rather than running without
  // metrics.
  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  absl::Cleanup close_taken = [taken] { ::close(taken); };
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string in_use = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));

  for (const std::string& bad : {std::string("localhost:9100"), std::string("127.0.0.1:99999"),
                                 std::string("127.0.0.1"), std::string("::1:9100"), in_use}) {
    auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--rc", "off", "--dc", "off",
                         "--metrics-listen", bad},
                        (*dir)->path(), "bad", absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NE(r->exit_code, 0) << bad << ": " << r->Describe();
    EXPECT_TRUE(absl::StrContains(r->err, "--metrics-listen")) << bad << ": " << r->err;
    EXPECT_TRUE(absl::StrContains(r->err, bad)) << bad << ": " << r->err;
  }
}

}  // namespace
}  // namespace gdr::integ
