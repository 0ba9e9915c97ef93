// The fault rule text: every field parsed, printed back the same, and each malformed or
// contradictory rule refused naming its field.
#include "common/wire/fault_spec.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

TEST(FaultSpecTest, ParsesEveryFieldAndPrintsItBack) {
  const std::string text =
      "kind=error,volume=vol0,client=trainer,ops=get,rate=0.25,count=10,for=5s,code=DATA_LOSS,"
      "seed=42";
  absl::StatusOr<v1::FaultSpec> s = ParseFaultSpec(text);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind(), v1::FAULT_ERROR);
  EXPECT_EQ(s->volume(), "vol0");
  EXPECT_EQ(s->client(), "trainer");
  EXPECT_EQ(s->ops(), v1::FAULT_OPS_GET);
  EXPECT_DOUBLE_EQ(s->rate(), 0.25);
  EXPECT_EQ(s->count(), 10u);
  EXPECT_EQ(s->for_ms(), 5000u);
  EXPECT_EQ(s->code(), 15);
  EXPECT_EQ(s->seed(), 42u);
  EXPECT_EQ(FormatFaultSpec(*s), text);
  for (const char* t : {"kind=stall,every=3,delay=250ms", "kind=stall,for=1m",
                        "kind=corrupt,volume=v", "kind=drop-link,client=127.0.0.1",
                        "kind=qp-error,count=1", "kind=rail-down,for=2s,rail=mlx5_1",
                        "kind=error,code=14", "kind=error,rate=0.1234567891"}) {
    absl::StatusOr<v1::FaultSpec> p = ParseFaultSpec(t);
    ASSERT_TRUE(p.ok()) << t << ": " << p.status();
    absl::StatusOr<v1::FaultSpec> again = ParseFaultSpec(FormatFaultSpec(*p));
    ASSERT_TRUE(again.ok()) << FormatFaultSpec(*p);
    EXPECT_EQ(again->SerializeAsString(), p->SerializeAsString()) << t;
  }
}

// drop-link and qp-error are one transport fault, "break the op's path", each spelled for the
// transport whose ops it hits; the other kinds are no transport fault.
TEST(FaultSpecTest, DropLinkAndQpErrorBreakThePathOfOneTransport) {
  EXPECT_EQ(BreakPathTransport(v1::FAULT_DROP_LINK), TransportKind::kTcp);
  EXPECT_EQ(BreakPathTransport(v1::FAULT_QP_ERROR), TransportKind::kRc);
  for (v1::FaultKind k : {v1::FAULT_ERROR, v1::FAULT_STALL, v1::FAULT_CORRUPT,
                          v1::FAULT_RAIL_DOWN, v1::FAULT_KIND_UNSPECIFIED}) {
    EXPECT_EQ(BreakPathTransport(k), std::nullopt) << FaultKindName(k);
  }
}

TEST(FaultSpecTest, RefusesBadRulesNamingTheField) {
  const struct {
    const char* text;
    const char* names;
  } cases[] = {
      {"", "spec"},
      {"volume=v0", "kind"},
      {"kind=explode", "kind"},
      {"kind=error,rate=0", "rate"},
      {"kind=error,rate=1.5", "rate"},
      {"kind=error,rate=nan", "rate"},
      {"kind=error,rate=0.1,every=3", "rate"},
      {"kind=error,code=BANANA", "code"},
      {"kind=error,code=0x", "code"},
      {"kind=error,code=17", "code"},
      {"kind=stall,code=UNAVAILABLE,delay=1s", "code"},
      {"kind=error,delay=1s", "delay"},
      {"kind=stall", "delay"},
      {"kind=stall,delay=-1s", "delay"},
      {"kind=stall,delay=25h", "delay"},
      {"kind=stall,delay=1500us", "delay"},
      {"kind=corrupt,ops=put", "ops"},
      {"kind=error,ops=sideways", "ops"},
      {"kind=rail-down,for=1s", "rail"},
      {"kind=rail-down,rail=mlx5_0", "for"},
      {"kind=rail-down,rail=mlx5_0,for=1s,volume=v0", "rail"},
      {"kind=error,rail=mlx5_0", "rail"},
      {"kind=error,volume=a b", "volume"},
      {"kind=error,client=x;y", "client"},
      {"kind=error,every=-1", "every"},
      {"kind=error,count=1,count=2", "count"},
      {"kind=error,colour=red", "spec"},
      {"kind=error,,", "spec"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<v1::FaultSpec> s = ParseFaultSpec(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_TRUE(absl::StartsWith(s.status().message(), absl::StrCat("fault ", c.names, ":")))
        << c.text << " -> " << s.status();
  }
}

TEST(FaultSpecTest, ChecksSpecsFromTheWireToo) {
  v1::FaultSpec s;
  EXPECT_FALSE(CheckFaultSpec(s).ok());  // no kind
  s.set_kind(static_cast<v1::FaultKind>(77));
  EXPECT_FALSE(CheckFaultSpec(s).ok());
  s.set_kind(v1::FAULT_ERROR);
  EXPECT_TRUE(CheckFaultSpec(s).ok());
  s.set_ops(static_cast<v1::FaultOps>(9));
  EXPECT_FALSE(CheckFaultSpec(s).ok());
  s.set_ops(v1::FAULT_OPS_ANY);
  s.set_volume(std::string(200, 'v'));
  EXPECT_FALSE(CheckFaultSpec(s).ok());
  s.set_volume("v0");
  s.set_code(-3);
  EXPECT_FALSE(CheckFaultSpec(s).ok());
  s.set_code(0);
  s.set_for_ms(uint64_t{1} << 62);
  EXPECT_FALSE(CheckFaultSpec(s).ok());
}

}  // namespace
}  // namespace gdr
