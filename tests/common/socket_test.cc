// Unit tests of the socket helpers (common/base/socket.h) over real socketpairs and loopback TCP,
// and of the iovec advance after a partial send.
#include "common/base/socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

struct Pair {
  ScopedFd a;
  ScopedFd b;
};

Pair MakePair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0) << strerror(errno);
  return {ScopedFd(fds[0]), ScopedFd(fds[1])};
}

std::vector<std::byte> PatternBytes(uint64_t salt, size_t n) {
  std::vector<std::byte> v(n);
  PatternFill(PatternSeed("socket_test", salt), 0, v);
  return v;
}

bool FdIsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(ScopedFdTest, ClosesOnResetDestructionAndMoveAssign) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    ScopedFd a(fds[0]);
    ScopedFd b(fds[1]);
    EXPECT_TRUE(a.valid());
    ScopedFd c(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(c.get(), fds[0]);
    c = std::move(b);  // closes fds[0]
    EXPECT_FALSE(FdIsOpen(fds[0]));
    EXPECT_TRUE(FdIsOpen(fds[1]));
  }
  EXPECT_FALSE(FdIsOpen(fds[1]));
}

TEST(BufferedReaderTest, ManySmallFrames) {
  Pair p = MakePair();
  constexpr uint32_t kFrames = 20000;
  // More than a socket buffer's worth, so reader and writer must overlap.
  auto writer = std::async(std::launch::async, [&] {
    std::vector<std::byte> all(kFrames * 12);
    for (uint32_t i = 0; i < kFrames; ++i) {
      const uint64_t v = uint64_t{i} * 0x9E3779B97F4A7C15ull;
      std::memcpy(all.data() + i * 12, &i, 4);
      std::memcpy(all.data() + i * 12 + 4, &v, 8);
    }
    // Uneven write sizes so frames straddle recv boundaries.
    size_t off = 0, step = 1;
    absl::Status s;
    while (off < all.size() && s.ok()) {
      const size_t n = std::min(step, all.size() - off);
      s = WriteFull(p.a.get(), all.data() + off, n);
      off += n;
      step = step * 7 % 5003 + 1;
    }
    return s;
  });
  BufferedReader reader(p.b.get(), 4096);
  for (uint32_t i = 0; i < kFrames; ++i) {
    uint32_t idx;
    uint64_t v;
    ASSERT_TRUE(reader.Read(&idx, 4).ok());
    ASSERT_TRUE(reader.Read(&v, 8).ok());
    ASSERT_EQ(idx, i);
    ASSERT_EQ(v, uint64_t{i} * 0x9E3779B97F4A7C15ull);
  }
  EXPECT_TRUE(writer.get().ok());
  EXPECT_FALSE(reader.HasBuffered());
}

TEST(BufferedReaderTest, LargeReadBypassesTheBuffer) {
  Pair p = MakePair();
  constexpr size_t kCap = 256;
  const auto big = PatternBytes(1, 1000);
  const std::array<char, 5> trailer = {'t', 'a', 'i', 'l', '!'};
  // Everything is queued before the first read: a buffering reader would pull trailer bytes
  // into its buffer; one that bypasses reads exactly the payload.
  ASSERT_TRUE(WriteFull(p.a.get(), big.data(), big.size()).ok());
  ASSERT_TRUE(WriteFull(p.a.get(), trailer.data(), trailer.size()).ok());
  BufferedReader reader(p.b.get(), kCap);
  std::vector<std::byte> got(big.size());
  ASSERT_TRUE(reader.Read(got.data(), got.size()).ok());
  EXPECT_EQ(got, big);
  EXPECT_FALSE(reader.HasBuffered());
  std::array<char, 5> t{};
  ASSERT_TRUE(reader.Read(t.data(), t.size()).ok());
  EXPECT_EQ(t, trailer);
}

TEST(BufferedReaderTest, LargeReadAfterBufferedBytesKeepsOrder) {
  Pair p = MakePair();
  const auto head = PatternBytes(2, 40);
  const auto big = PatternBytes(3, 100000);
  ASSERT_TRUE(WriteFull(p.a.get(), head.data(), head.size()).ok());
  BufferedReader reader(p.b.get(), 4096);
  std::vector<std::byte> first(10);
  ASSERT_TRUE(reader.Read(first.data(), first.size()).ok());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), head.begin()));
  EXPECT_TRUE(reader.HasBuffered());  // 30 bytes of head wait in the buffer

  auto writer = std::async(std::launch::async,
                           [&] { return WriteFull(p.a.get(), big.data(), big.size()); });
  // 30 buffered bytes come first, then the payload straight from the socket.
  std::vector<std::byte> rest(30 + big.size());
  ASSERT_TRUE(reader.Read(rest.data(), rest.size()).ok());
  EXPECT_TRUE(std::equal(head.begin() + 10, head.end(), rest.begin()));
  EXPECT_TRUE(std::equal(big.begin(), big.end(), rest.begin() + 30));
  EXPECT_TRUE(writer.get().ok());
}

TEST(BufferedReaderTest, SkipWithinAndBeyondTheBuffer) {
  Pair p = MakePair();
  const auto data = PatternBytes(4, 50000);
  auto writer = std::async(std::launch::async,
                           [&] { return WriteFull(p.a.get(), data.data(), data.size()); });
  BufferedReader reader(p.b.get(), 1024);
  std::byte b;
  ASSERT_TRUE(reader.Read(&b, 1).ok());
  EXPECT_EQ(b, data[0]);
  ASSERT_TRUE(reader.Skip(9).ok());  // within the buffer
  ASSERT_TRUE(reader.Read(&b, 1).ok());
  EXPECT_EQ(b, data[10]);
  ASSERT_TRUE(reader.Skip(20000).ok());  // many buffer fills
  std::vector<std::byte> got(100);
  ASSERT_TRUE(reader.Read(got.data(), got.size()).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + 20011));
  ASSERT_TRUE(reader.Skip(0).ok());
  ASSERT_TRUE(reader.Skip(data.size() - 20111 - 1).ok());
  ASSERT_TRUE(reader.Read(&b, 1).ok());
  EXPECT_EQ(b, data.back());
  EXPECT_TRUE(writer.get().ok());
}

TEST(BufferedReaderTest, EofMidReadIsUnavailable) {
  Pair p = MakePair();
  const auto data = PatternBytes(5, 10);
  ASSERT_TRUE(WriteFull(p.a.get(), data.data(), data.size()).ok());
  p.a.Reset();
  BufferedReader reader(p.b.get(), 4096);
  std::array<std::byte, 20> got;
  absl::Status s = reader.Read(got.data(), got.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(BufferedReaderTest, EofMidLargeReadIsUnavailable) {
  Pair p = MakePair();
  const auto data = PatternBytes(6, 3000);
  ASSERT_TRUE(WriteFull(p.a.get(), data.data(), data.size()).ok());
  p.a.Reset();
  BufferedReader reader(p.b.get(), 256);
  std::vector<std::byte> got(5000);  // bypass path
  EXPECT_EQ(reader.Read(got.data(), got.size()).code(), absl::StatusCode::kUnavailable);
}

TEST(BufferedReaderTest, EofMidSkipIsUnavailable) {
  Pair p = MakePair();
  const auto data = PatternBytes(7, 100);
  ASSERT_TRUE(WriteFull(p.a.get(), data.data(), data.size()).ok());
  p.a.Reset();
  BufferedReader reader(p.b.get(), 64);
  EXPECT_EQ(reader.Skip(101).code(), absl::StatusCode::kUnavailable);
}

TEST(ReadFullTest, ReportsBytesReadBeforeEof) {
  Pair p = MakePair();
  const auto data = PatternBytes(8, 7);
  ASSERT_TRUE(WriteFull(p.a.get(), data.data(), data.size()).ok());
  p.a.Reset();
  std::array<std::byte, 16> got;
  size_t n = 999;
  absl::Status s = ReadFull(p.b.get(), got.data(), got.size(), &n);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(n, 7u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), got.begin()));
}

TEST(ReadFullTest, DiscardDropsExactlyN) {
  Pair p = MakePair();
  const auto data = PatternBytes(9, 200000);
  auto writer = std::async(std::launch::async,
                           [&] { return WriteFull(p.a.get(), data.data(), data.size()); });
  ASSERT_TRUE(Discard(p.b.get(), 199990).ok());
  std::array<std::byte, 10> tail;
  ASSERT_TRUE(ReadFull(p.b.get(), tail.data(), tail.size()).ok());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), data.end() - 10));
  EXPECT_TRUE(writer.get().ok());
}

TEST(WriteFullVTest, SeveralIovecsLargerThanTheSocketBuffer) {
  Pair p = MakePair();
  SetSocketBuffers(p.a.get(), 16 * 1024);
  SetSocketBuffers(p.b.get(), 16 * 1024);
  // Uneven pieces, one empty, so partial sends split iovecs at odd points.
  const std::vector<size_t> sizes = {1 << 20, 3, 0, (2 << 20) + 1, 17, 300001};
  std::vector<std::vector<std::byte>> pieces;
  std::vector<std::byte> expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    pieces.push_back(PatternBytes(100 + i, sizes[i]));
    expected.insert(expected.end(), pieces.back().begin(), pieces.back().end());
  }
  auto reader = std::async(std::launch::async, [&] {
    std::vector<std::byte> got(expected.size());
    absl::Status s = ReadFull(p.b.get(), got.data(), got.size());
    EXPECT_TRUE(s.ok()) << s;
    return got;
  });
  std::vector<struct iovec> iov;
  for (auto& piece : pieces) iov.push_back({piece.data(), piece.size()});
  absl::Status s = WriteFullV(p.a.get(), iov.data(), static_cast<int>(iov.size()));
  EXPECT_TRUE(s.ok()) << s;
  std::vector<std::byte> got = reader.get();
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "first mismatch at "
                               << std::distance(got.begin(),
                                                std::mismatch(got.begin(), got.end(),
                                                              expected.begin())
                                                    .first);
}

TEST(WriteFullVTest, PeerClosedIsAnErrorNotASignal) {
  Pair p = MakePair();
  p.b.Reset();
  const auto data = PatternBytes(10, 1000);
  // MSG_NOSIGNAL: EPIPE comes back as a status instead of killing the test with SIGPIPE.
  absl::Status s = WriteFull(p.a.get(), data.data(), data.size());
  EXPECT_FALSE(s.ok());
}

// A loopback port with nothing listening: bound (so nobody else takes it) but not listening,
// so a connect is refused at once.
struct ClosedPort {
  ScopedFd fd;
  uint16_t port = 0;
};

ClosedPort BindClosedPort() {
  ClosedPort c;
  c.fd = ScopedFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(c.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(c.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  c.port = ntohs(addr.sin_port);
  return c;
}

// Three iovecs of 10, 20 and 30 bytes laid end to end over `buf`.
std::array<struct iovec, 3> ThreeIovecs(std::array<char, 60>& buf) {
  return {{{buf.data(), 10}, {buf.data() + 10, 20}, {buf.data() + 30, 30}}};
}

TEST(AdvanceIovecsTest, WithinTheFirstIovec) {
  std::array<char, 60> buf;
  auto iov = ThreeIovecs(buf);
  EXPECT_EQ(AdvanceIovecs(iov.data(), 3, 4), 0);
  EXPECT_EQ(iov[0].iov_base, buf.data() + 4);
  EXPECT_EQ(iov[0].iov_len, 6u);
  EXPECT_EQ(iov[1].iov_base, buf.data() + 10);
  EXPECT_EQ(iov[1].iov_len, 20u);
}

TEST(AdvanceIovecsTest, ExactlyToABoundaryLeavesTheNextWhole) {
  std::array<char, 60> buf;
  auto iov = ThreeIovecs(buf);
  EXPECT_EQ(AdvanceIovecs(iov.data(), 3, 10), 1);
  EXPECT_EQ(iov[1].iov_base, buf.data() + 10);
  EXPECT_EQ(iov[1].iov_len, 20u);
}

TEST(AdvanceIovecsTest, AcrossSeveralIovecs) {
  std::array<char, 60> buf;
  auto iov = ThreeIovecs(buf);
  EXPECT_EQ(AdvanceIovecs(iov.data(), 3, 10 + 20 + 5), 2);
  EXPECT_EQ(iov[2].iov_base, buf.data() + 35);
  EXPECT_EQ(iov[2].iov_len, 25u);
  // Resuming from where it stopped, as the callers do.
  EXPECT_EQ(AdvanceIovecs(iov.data() + 2, 1, 5), 0);
  EXPECT_EQ(iov[2].iov_base, buf.data() + 40);
  EXPECT_EQ(iov[2].iov_len, 20u);
}

TEST(AdvanceIovecsTest, ToTheEnd) {
  std::array<char, 60> buf;
  auto iov = ThreeIovecs(buf);
  EXPECT_EQ(AdvanceIovecs(iov.data(), 3, 60), 3);
  EXPECT_EQ(iov[2].iov_base, buf.data() + 30);  // whole iovecs are left as they were
  EXPECT_EQ(iov[2].iov_len, 30u);
}

TEST(AdvanceIovecsTest, EmptyIovecsAtTheBoundaryCountAsSent) {
  std::array<char, 8> buf;
  std::array<struct iovec, 3> iov = {{{buf.data(), 4}, {buf.data() + 4, 0}, {buf.data() + 4, 4}}};
  EXPECT_EQ(AdvanceIovecs(iov.data(), 3, 4), 2);
  EXPECT_EQ(iov[2].iov_len, 4u);
  EXPECT_EQ(AdvanceIovecs(iov.data(), 1, 0), 0);  // nothing sent: nothing moves
  EXPECT_EQ(iov[0].iov_len, 4u);
}

TEST(ConnectTcpTest, ClosedLoopbackPortIsRefusedNotTimedOut) {
  ClosedPort closed = BindClosedPort();
  ASSERT_NE(closed.port, 0);
  // A long timeout: a refusal must come back as a refusal, not by running out the clock.
  absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", closed.port, absl::Seconds(60));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(fd.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", closed.port)));
  EXPECT_THAT(fd.status().message(), ::testing::Not(HasSubstr("timed out")));
}

TEST(ListenTcpTest, EphemeralPortAcceptsConnections) {
  uint16_t port = 0;
  absl::StatusOr<ScopedFd> listener = ListenTcp("127.0.0.1", 0, 8, &port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  ASSERT_NE(port, 0);

  absl::StatusOr<ScopedFd> client = ConnectTcp("127.0.0.1", port, absl::Seconds(30));
  ASSERT_TRUE(client.ok()) << client.status();
  ScopedFd server(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(server.valid()) << strerror(errno);

  // The connected socket is blocking again and has TCP_NODELAY.
  EXPECT_EQ(::fcntl(client->get(), F_GETFL) & O_NONBLOCK, 0);
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(::getsockopt(client->get(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);

  const auto data = PatternBytes(11, 4096);
  ASSERT_TRUE(WriteFull(client->get(), data.data(), data.size()).ok());
  std::vector<std::byte> got(data.size());
  ASSERT_TRUE(ReadFull(server.get(), got.data(), got.size()).ok());
  EXPECT_EQ(got, data);

  // Two listeners get two different ephemeral ports.
  uint16_t port2 = 0;
  absl::StatusOr<ScopedFd> listener2 = ListenTcp("127.0.0.1", 0, 8, &port2);
  ASSERT_TRUE(listener2.ok()) << listener2.status();
  EXPECT_NE(port2, 0);
  EXPECT_NE(port2, port);
}

TEST(ListenTcpTest, PortInUseAndBadAddressFail) {
  uint16_t port = 0;
  absl::StatusOr<ScopedFd> listener = ListenTcp("127.0.0.1", 0, 8, &port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_FALSE(ListenTcp("127.0.0.1", port, 8, nullptr).ok());
  EXPECT_EQ(ListenTcp("not-an-address", 0, 8, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalAddressTowardTest, LoopbackRoutesFromLoopback) {
  absl::StatusOr<std::string> addr = LocalAddressToward("127.0.0.1", 9);
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_EQ(*addr, "127.0.0.1");
}

}  // namespace
}  // namespace gdr
