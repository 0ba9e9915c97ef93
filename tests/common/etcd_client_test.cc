// The etcd client against a real etcd (tests/common/etcd_server): keys, prefixes,
// transactions, leases and their expiry, watches across an etcd restart, calls while etcd is
// away, and failing over from a dead endpoint. The etcd:// URL parser needs no etcd.
#include "common/etcd/etcd_client.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/etcd/etcd_url.h"
#include "tests/common/etcd_server.h"

namespace gdr::etcd {
namespace {

using integ::BoundPort;
using integ::EtcdServer;
using integ::PollUntil;

// Generous: the machine running the tests may be loaded. Never an assertion on speed.
constexpr absl::Duration kEventually = absl::Seconds(30);

// ---- etcd:// URLs ----

TEST(EtcdUrlTest, ParsesOneAndManyEndpoints) {
  absl::StatusOr<EtcdUrl> one = ParseEtcdUrl("etcd://127.0.0.1:2379/gdr");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->endpoints, std::vector<std::string>{"127.0.0.1:2379"});
  EXPECT_EQ(one->prefix, "/gdr");

  absl::StatusOr<EtcdUrl> many =
      ParseEtcdUrl("etcd://etcd-1.example:2379,10.0.0.2:1,[::1]:65535/cluster-a/v1_x.y/");
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(many->endpoints,
            (std::vector<std::string>{"etcd-1.example:2379", "10.0.0.2:1", "[::1]:65535"}));
  EXPECT_EQ(many->prefix, "/cluster-a/v1_x.y");  // the trailing slash dropped
}

TEST(EtcdUrlTest, RefusesEachBadPartNamingIt) {
  const std::string long_url = "etcd://h:1/" + std::string(5000, 'a');
  const struct {
    std::string url;
    std::string names;  // what the error must say
  } cases[] = {
      {"http://h:1/x", "scheme 'http' is not etcd"},
      {"h:1/x", "no scheme"},
      {"etcd:///x", "no endpoint"},
      {"etcd://:2379/x", "endpoint ':2379' has an empty host"},
      {"etcd://[]:2379/x", "endpoint '[]:2379' has an empty host"},
      {"etcd://h:0/x", "bad port"},
      {"etcd://h:65536/x", "bad port"},
      {"etcd://h:12ab/x", "bad port"},
      {"etcd://h:+80/x", "port that is not all digits"},
      {"etcd://h/x", "endpoint 'h'"},
      {"etcd://h:1,,k:2/x", "endpoint 2 of 3 is empty"},
      {"etcd://h:1,/x", "endpoint 2 of 2 is empty"},
      {"etcd://user@h:1/x", "endpoint 'user@h:1' has a host that is not a host name"},
      {"etcd://..:1/x", "endpoint '..:1' has a host that is not a host name"},
      {"etcd://-h:1/x", "has a host that is not a host name"},
      {"etcd://a..b:1/x", "has a host that is not a host name"},
      {"etcd://[fe80::1%25eth0]:1/x", "has no IPv6 address in brackets"},
      {"etcd://[10.0.0.1]:1/x", "has no IPv6 address in brackets"},
      {"etcd://[zz::1]:1/x", "has no IPv6 address in brackets"},
      {"etcd://h:1,h:1/x", "endpoint 'h:1' is listed twice"},
      {"etcd://h:1", "missing the key prefix"},
      {"etcd://h:1/", "missing the key prefix"},
      {"etcd://h:1/a b", "space, control or non-ASCII character at offset 12"},
      {" etcd://h:1/a", "at offset 0"},
      {"etcd://h:1/a\tb", "at offset 12"},
      {"etcd://h:1/a/../b", "a '..' segment"},
      {"etcd://h:1/..", "a '..' segment"},
      {"etcd://h:1/a/./b", "a '.' segment"},
      {"etcd://h:1/a//b", "empty segment"},
      {"etcd://h:1/a?b=c", "the prefix has '?'"},
      {"etcd://h:1/a%2e", "the prefix has '%'"},
      {long_url, "longer than 4096"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<EtcdUrl> r = ParseEtcdUrl(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.url;
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.names)) << c.url << " -> " << r.status();
    if (c.url.size() < 100) {
      EXPECT_TRUE(absl::StrContains(r.status().message(), "'" + c.url + "'")) << r.status();
    }
  }
}

// ---- the client against a real etcd ----

TEST(EtcdClientCreateTest, RefusesBadOptionsWithoutEtcd) {
  EXPECT_EQ(EtcdClient::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<EtcdClient>> bad =
      EtcdClient::Create({.endpoints = {"127.0.0.1:2379", "nohost"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "'nohost'")) << bad.status();
  EXPECT_EQ(
      EtcdClient::Create({.endpoints = {"127.0.0.1:2379"}, .call_timeout = absl::ZeroDuration()})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// Records what a watch delivers; waits for it with a bound.
class WatchLog {
 public:
  void OnEvent(const WatchEvent& e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(e);
  }
  void OnError(const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    errors_.push_back(s);
  }
  std::unique_ptr<EtcdClient::Watch> Start(EtcdClient& client, const std::string& prefix,
                                           int64_t start_revision) {
    return client.WatchPrefix(
        prefix, start_revision, [this](const WatchEvent& e) { OnEvent(e); },
        [this](const absl::Status& s) { OnError(s); });
  }
  // True once at least `n` events arrived.
  bool WaitEvents(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kEventually);
  }
  // True once at least `n` error reports arrived.
  bool WaitErrors(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return errors_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kEventually);
  }
  // True once the last error report is non-OK (want_ok false) or OK (want_ok true).
  bool WaitLastError(bool want_ok) {
    absl::MutexLock lock(&mu_);
    auto seen = [this, want_ok]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !errors_.empty() && errors_.back().ok() == want_ok;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), kEventually);
  }
  std::vector<WatchEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<absl::Status> errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

 private:
  absl::Mutex mu_;
  std::vector<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
};

std::string Describe(const std::vector<WatchEvent>& events) {
  std::string out;
  for (const WatchEvent& e : events) {
    absl::StrAppend(&out, e.kind == WatchEvent::kPut ? "put " : "delete ", e.kv.key, "=",
                    e.kv.value, "@", e.kv.mod_revision, "; ");
  }
  return out;
}

bool UnreachableCode(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded;
}

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status a = EtcdServer::Available(); !a.ok()) GTEST_SKIP() << a.message();
    absl::StatusOr<std::unique_ptr<EtcdServer>> server = EtcdServer::Create();
    ASSERT_TRUE(server.ok()) << server.status();
    etcd_ = *std::move(server);
    client_ = NewClient({etcd_->endpoint()});
    ASSERT_NE(client_, nullptr);
  }

  static std::unique_ptr<EtcdClient> NewClient(std::vector<std::string> endpoints) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> c =
        EtcdClient::Create({.endpoints = std::move(endpoints)});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutGetPrefixAndDelete) {
  ASSERT_TRUE(client_->Put("/t/a", "1").ok());
  ASSERT_TRUE(client_->Put("/t/b", "2").ok());
  ASSERT_TRUE(client_->Put("/tz", "outside").ok());

  absl::StatusOr<std::optional<KeyValue>> a = client_->Get("/t/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value, "1");
  EXPECT_EQ((*a)->version, 1);
  EXPECT_GT((*a)->create_revision, 0);
  EXPECT_EQ((*a)->mod_revision, (*a)->create_revision);
  EXPECT_EQ((*a)->lease, 0);

  ASSERT_TRUE(client_->Put("/t/a", "1b").ok());
  absl::StatusOr<std::optional<KeyValue>> a2 = client_->Get("/t/a");
  ASSERT_TRUE(a2.ok() && a2->has_value());
  EXPECT_EQ((*a2)->value, "1b");
  EXPECT_EQ((*a2)->version, 2);
  EXPECT_EQ((*a2)->create_revision, (*a)->create_revision);
  EXPECT_GT((*a2)->mod_revision, (*a)->mod_revision);

  absl::StatusOr<std::optional<KeyValue>> missing = client_->Get("/t/none");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());

  int64_t revision = 0;
  absl::StatusOr<std::vector<KeyValue>> under = client_->GetPrefix("/t/", &revision);
  ASSERT_TRUE(under.ok()) << under.status();
  ASSERT_EQ(under->size(), 2u);
  EXPECT_EQ((*under)[0].key, "/t/a");
  EXPECT_EQ((*under)[1].key, "/t/b");
  EXPECT_EQ((*under)[1].value, "2");
  EXPECT_EQ(revision, (*a2)->mod_revision);  // the last write so far

  ASSERT_TRUE(client_->Delete("/t/a").ok());
  EXPECT_TRUE(client_->Delete("/t/a").ok()) << "deleting what is gone is not an error";
  absl::StatusOr<std::optional<KeyValue>> gone = client_->Get("/t/a");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  under = client_->GetPrefix("/t/");
  ASSERT_TRUE(under.ok());
  ASSERT_EQ(under->size(), 1u);
  EXPECT_EQ((*under)[0].key, "/t/b");

  EXPECT_EQ(client_->Put("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Get("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, PrefixEndingInFfStillEndsAtItsNextPrefix) {
  // The range end of "/p\xff" is "/q": the 0xff byte cannot be incremented and carries.
  const std::string p = "/p\xff";
  ASSERT_TRUE(client_->Put(p + "1", "a").ok());
  ASSERT_TRUE(client_->Put(p + "\xff", "b").ok());
  ASSERT_TRUE(client_->Put("/q", "outside").ok());
  ASSERT_TRUE(client_->Put("/p", "outside").ok());
  absl::StatusOr<std::vector<KeyValue>> under = client_->GetPrefix(p);
  ASSERT_TRUE(under.ok()) << under.status();
  ASSERT_EQ(under->size(), 2u);
  EXPECT_EQ((*under)[0].key, p + "1");
  EXPECT_EQ((*under)[1].key, p + "\xff");
}

TEST_F(EtcdClientTest, PutIfAbsentPutsOnlyOnce) {
  absl::StatusOr<bool> first = client_->PutIfAbsent("/once", "first");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  absl::StatusOr<bool> second = client_->PutIfAbsent("/once", "second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);
  absl::StatusOr<std::optional<KeyValue>> kv = client_->Get("/once");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ((*kv)->value, "first");
  EXPECT_EQ((*kv)->version, 1);
}

TEST_F(EtcdClientTest, RevokedLeaseTakesItsKeyAlong) {
  absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_NE(*lease, 0);
  ASSERT_TRUE(client_->Put("/leased", "here", *lease).ok());
  absl::StatusOr<std::optional<KeyValue>> kv = client_->Get("/leased");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ((*kv)->lease, *lease);

  absl::StatusOr<absl::Duration> kept = client_->KeepAliveOnce(*lease);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_GT(*kept, absl::ZeroDuration());
  EXPECT_LE(*kept, absl::Seconds(30));
  absl::StatusOr<absl::Duration> left = client_->TimeToLive(*lease);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GT(*left, absl::ZeroDuration());
  EXPECT_LE(*left, absl::Seconds(30));

  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  kv = client_->Get("/leased");
  ASSERT_TRUE(kv.ok());
  EXPECT_FALSE(kv->has_value()) << "the revoked lease's key is still there";
  EXPECT_EQ(client_->TimeToLive(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->KeepAliveOnce(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(*lease).code(), absl::StatusCode::kNotFound);
  // A key cannot be attached to a lease that is gone.
  EXPECT_EQ(client_->Put("/late", "x", *lease).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->GrantLease(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, ExpiredLeaseDeletesItsKey) {
  absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/expiring", "soon", *lease).ok());
  // Nobody keeps it alive: etcd ends it after its TTL (raised to etcd's minimum, about 2 s).
  EXPECT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<std::optional<KeyValue>> kv = client_->Get("/expiring");
        return kv.ok() && !kv->has_value();
      },
      kEventually, absl::Milliseconds(100)));
  EXPECT_EQ(client_->TimeToLive(*lease).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesInOrderAfterItsStartRevision) {
  ASSERT_TRUE(client_->Put("/w/before", "old").ok());
  int64_t revision = 0;
  ASSERT_TRUE(client_->GetPrefix("/w/", &revision).ok());
  WatchLog log;
  std::unique_ptr<EtcdClient::Watch> watch = log.Start(*client_, "/w/", revision);
  ASSERT_TRUE(client_->Put("/w/a", "1").ok());
  ASSERT_TRUE(client_->Put("/wx", "outside").ok());
  ASSERT_TRUE(client_->Put("/w/b", "2").ok());
  ASSERT_TRUE(client_->Delete("/w/a").ok());
  ASSERT_TRUE(client_->Put("/w/c", "3").ok());
  ASSERT_TRUE(log.WaitEvents(4)) << Describe(log.events());
  const std::vector<WatchEvent> events = log.events();
  ASSERT_EQ(events.size(), 4u) << Describe(events);
  EXPECT_EQ(events[0].kind, WatchEvent::kPut);
  EXPECT_EQ(events[0].kv.key, "/w/a");
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[1].kind, WatchEvent::kPut);
  EXPECT_EQ(events[1].kv.key, "/w/b");
  EXPECT_EQ(events[2].kind, WatchEvent::kDelete);
  EXPECT_EQ(events[2].kv.key, "/w/a");
  EXPECT_EQ(events[3].kv.key, "/w/c");
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GT(events[i].kv.mod_revision, events[i - 1].kv.mod_revision) << Describe(events);
  }
  EXPECT_TRUE(log.errors().empty());
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionReportsTheLossAndGoesOn) {
  int64_t old_revision = 0;
  ASSERT_TRUE(client_->GetPrefix("/c/", &old_revision).ok());
  for (const char* k : {"/c/a", "/c/b", "/c/c"}) ASSERT_TRUE(client_->Put(k, "v").ok());
  int64_t now = 0;
  ASSERT_TRUE(client_->GetPrefix("/c/", &now).ok());
  ASSERT_TRUE(client_->Compact(now).ok());
  EXPECT_EQ(client_->Compact(old_revision).code(), absl::StatusCode::kOutOfRange);

  WatchLog log;
  std::unique_ptr<EtcdClient::Watch> watch = log.Start(*client_, "/c/", old_revision);
  ASSERT_TRUE(log.WaitErrors(1));
  const absl::Status loss = log.errors().front();
  EXPECT_EQ(loss.code(), absl::StatusCode::kDataLoss) << loss;
  EXPECT_TRUE(absl::StrContains(loss.message(), "compacted")) << loss;
  // It goes on from the oldest revision etcd kept: the last put, then anything new.
  ASSERT_TRUE(client_->Put("/c/d", "v").ok());
  ASSERT_TRUE(log.WaitEvents(2)) << Describe(log.events());
  const std::vector<WatchEvent> events = log.events();
  ASSERT_EQ(events.size(), 2u) << Describe(events);
  EXPECT_EQ(events[0].kv.key, "/c/c");
  EXPECT_EQ(events[0].kv.mod_revision, now);
  EXPECT_EQ(events[1].kv.key, "/c/d");
  EXPECT_EQ(log.errors().size(), 1u);
}

TEST_F(EtcdClientTest, WatchSurvivesAnEtcdRestartWithoutMissingOrRepeating) {
  int64_t revision = 0;
  ASSERT_TRUE(client_->GetPrefix("/r/", &revision).ok());
  WatchLog log;
  std::unique_ptr<EtcdClient::Watch> watch = log.Start(*client_, "/r/", revision);
  ASSERT_TRUE(client_->Put("/r/before", "1").ok());
  ASSERT_TRUE(log.WaitEvents(1)) << Describe(log.events());

  ASSERT_TRUE(etcd_->Stop().ok());
  ASSERT_TRUE(log.WaitLastError(false)) << "the watch did not report the loss";
  const absl::Status loss = log.errors().front();
  EXPECT_TRUE(UnreachableCode(loss)) << loss;
  EXPECT_TRUE(absl::StrContains(loss.message(), etcd_->endpoint())) << loss;

  ASSERT_TRUE(etcd_->Start().ok());
  // Written through a client of its own at once, most likely before the watch is back: the
  // watch still has to deliver it, once.
  std::unique_ptr<EtcdClient> other = NewClient({etcd_->endpoint()});
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(other->Put("/r/after", "2").ok());
  ASSERT_TRUE(log.WaitEvents(2)) << Describe(log.events());
  ASSERT_TRUE(log.WaitLastError(true)) << "the watch did not report its recovery";
  ASSERT_TRUE(other->Put("/r/later", "3").ok());
  ASSERT_TRUE(log.WaitEvents(3)) << Describe(log.events());

  const std::vector<WatchEvent> events = log.events();
  ASSERT_EQ(events.size(), 3u) << Describe(events);
  EXPECT_EQ(events[0].kv.key, "/r/before");
  EXPECT_EQ(events[1].kv.key, "/r/after");
  EXPECT_EQ(events[2].kv.key, "/r/later");
  const std::vector<absl::Status> errors = log.errors();
  ASSERT_EQ(errors.size(), 2u) << "one loss, one recovery";
  EXPECT_FALSE(errors[0].ok());
  EXPECT_TRUE(errors[1].ok());
}

TEST_F(EtcdClientTest, CallsWhileEtcdIsAwayFailNamingTheEndpoint) {
  ASSERT_TRUE(client_->Put("/k", "before").ok());
  ASSERT_TRUE(etcd_->Kill().ok());  // no goodbye: the connection just breaks
  // Creating needs no etcd.
  std::unique_ptr<EtcdClient> fresh = NewClient({etcd_->endpoint()});
  ASSERT_NE(fresh, nullptr);
  for (EtcdClient* c : {client_.get(), fresh.get()}) {
    const absl::Status put = c->Put("/k", "v");
    EXPECT_TRUE(UnreachableCode(put)) << put;
    EXPECT_TRUE(absl::StrContains(put.message(), etcd_->endpoint())) << put;
    const absl::Status get = c->Get("/k").status();
    EXPECT_TRUE(UnreachableCode(get)) << get;
    EXPECT_TRUE(absl::StrContains(get.message(), etcd_->endpoint())) << get;
    const absl::Status grant = c->GrantLease(absl::Seconds(5)).status();
    EXPECT_TRUE(UnreachableCode(grant)) << grant;
    const absl::Status keep = c->KeepAliveOnce(1).status();
    EXPECT_TRUE(UnreachableCode(keep)) << keep;
  }
  ASSERT_TRUE(etcd_->Start().ok());
  // Calls do not wait for etcd; once the channel has reconnected they succeed again.
  EXPECT_TRUE(
      PollUntil([&] { return fresh->Put("/k", "v").ok(); }, kEventually, absl::Milliseconds(100)));
  EXPECT_TRUE(
      PollUntil([&] { return client_->Get("/k").ok(); }, kEventually, absl::Milliseconds(100)));
}

TEST_F(EtcdClientTest, ADeadFirstEndpointIsPassedOver) {
  absl::StatusOr<BoundPort> dead = BoundPort::Reserve();  // refuses connections
  ASSERT_TRUE(dead.ok()) << dead.status();
  std::unique_ptr<EtcdClient> c = NewClient({dead->address(), etcd_->endpoint()});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("/two", "v").ok());
  absl::StatusOr<std::optional<KeyValue>> kv = c->Get("/two");
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE(kv->has_value());
  EXPECT_EQ((*kv)->value, "v");
  absl::StatusOr<int64_t> lease = c->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(c->KeepAliveOnce(*lease).ok());

  int64_t revision = 0;
  ASSERT_TRUE(c->GetPrefix("/two", &revision).ok());
  WatchLog log;
  std::unique_ptr<EtcdClient::Watch> watch = log.Start(*c, "/two", revision);
  ASSERT_TRUE(c->Delete("/two").ok());
  ASSERT_TRUE(log.WaitEvents(1)) << Describe(log.events());
  EXPECT_EQ(log.events()[0].kind, WatchEvent::kDelete);

  // With both away the error names both.
  ASSERT_TRUE(etcd_->Stop().ok());
  const absl::Status both = c->Put("/two", "v");
  EXPECT_TRUE(UnreachableCode(both)) << both;
  EXPECT_TRUE(absl::StrContains(both.message(), dead->address())) << both;
  EXPECT_TRUE(absl::StrContains(both.message(), etcd_->endpoint())) << both;
}

TEST_F(EtcdClientTest, ASilentFirstEndpointIsPassedOverAtTheDeadline) {
  // Listening but never accepting: the TCP handshake completes, gRPC's does not, so a call
  // there ends at its deadline and moves on.
  absl::StatusOr<BoundPort> silent = BoundPort::Reserve();
  ASSERT_TRUE(silent.ok()) << silent.status();
  ASSERT_TRUE(silent->Listen().ok());
  const std::string silent_address = silent->address();

  std::unique_ptr<EtcdClient> c = NewClient({silent_address, etcd_->endpoint()});
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Put("/silent", "v").ok());
  absl::StatusOr<std::optional<KeyValue>> kv = c->Get("/silent");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_TRUE(kv->has_value());
}

}  // namespace
}  // namespace gdr::etcd
