// Unit tests of the tcp link's proof (common/wire/tcp_proof.h): the MAC against an independent
// OpenSSL computation, nonces and secrets from the CSPRNG, and both halves of the exchange over
// a real socket pair, right and wrong.
#include "common/wire/tcp_proof.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/base/socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr::tcpwire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

HandshakeBody Filled(uint8_t v) {
  HandshakeBody b;
  b.fill(std::byte(v));
  return b;
}

TEST(TcpProofTest, ProofIsHmacSha256OverLabelAndBothNonces) {
  const std::string secret(32, 'k');
  const HandshakeBody nd = Filled(1), nt = Filled(2);
  std::string msg(kProofLabel);
  msg.append(reinterpret_cast<const char*>(nd.data()), nd.size());
  msg.append(reinterpret_cast<const char*>(nt.data()), nt.size());
  unsigned char want[32];
  unsigned int len = 0;
  ASSERT_NE(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                 reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), want, &len),
            nullptr);
  ASSERT_EQ(len, 32u);
  const HandshakeBody got = ComputeProof(secret, nd, nt);
  EXPECT_EQ(std::memcmp(got.data(), want, 32), 0);
  // Every input matters, including which nonce is whose.
  EXPECT_NE(ComputeProof(secret, nt, nd), got);
  EXPECT_NE(ComputeProof(std::string(32, 'K'), nd, nt), got);
  EXPECT_NE(ComputeProof(secret, Filled(3), nt), got);
}

TEST(TcpProofTest, SecretsAreFreshAndDigestsDifferPerSecret) {
  absl::StatusOr<std::string> a = NewSecret(), b = NewSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kSecretBytes);
  EXPECT_NE(*a, *b);
  EXPECT_NE(SecretDigest(*a), SecretDigest(*b));
  EXPECT_EQ(SecretDigest(*a), SecretDigest(std::string(*a)));
}

// The digest is SHA-256 itself, from threads at once (the algorithm is fetched once and
// shared): FIPS 180-2's "abc" vector.
TEST(TcpProofTest, SecretDigestIsSha256FromManyThreads) {
  const std::string hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  Digest want;
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        if (SecretDigest("abc") != want) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    daemon = ScopedFd(fds[0]);
    target = ScopedFd(fds[1]);
  }
  ScopedFd daemon, target;
};

TEST(TcpProofTest, RightSecretIsProvedWrongSecretIsPermissionDenied) {
  const std::string secret(32, 's');
  {
    Pair p;
    absl::Status answered;
    std::thread t([&] {
      answered = AnswerChallenge(p.target.get(), secret, absl::Now() + absl::Seconds(30));
    });
    absl::Status s = ProveTarget(p.daemon.get(), secret, absl::Now() + absl::Seconds(30), "t:1");
    t.join();
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(answered.ok()) << answered;
  }
  {
    Pair p;
    std::string other = secret;
    other.back() ^= 1;
    std::thread t([&] {
      (void)AnswerChallenge(p.target.get(), other, absl::Now() + absl::Seconds(30));
    });
    absl::Status s = ProveTarget(p.daemon.get(), secret, absl::Now() + absl::Seconds(30), "t:1");
    t.join();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("tcp target t:1 did not prove"));
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr(secret)));
  }
}

TEST(TcpProofTest, SilenceAndClosesAreRefusedWithinTheDeadline) {
  {
    Pair p;  // the target never says HELLO
    absl::Status s =
        ProveTarget(p.daemon.get(), "0123456789abcdef", absl::Now() + absl::Milliseconds(50), "t");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("no HELLO in time"));
  }
  {
    Pair p;
    p.target.Reset();
    absl::Status s =
        ProveTarget(p.daemon.get(), "0123456789abcdef", absl::Now() + absl::Seconds(30), "t");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("closed before its HELLO"));
  }
  {
    Pair p;  // the daemon never sends its CHALLENGE
    absl::Status s =
        AnswerChallenge(p.target.get(), "0123456789abcdef", absl::Now() + absl::Milliseconds(50));
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  }
}

}  // namespace
}  // namespace gdr::tcpwire
