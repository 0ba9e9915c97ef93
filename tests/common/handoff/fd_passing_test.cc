// Descriptors over a Unix SOCK_SEQPACKET socketpair (common/base/fd_passing.h): they arrive
// working and close-on-exec, too many or too long is refused with every descriptor closed, a
// deadline ends a wait, a closed peer reads as EOF, and SO_PEERCRED names this process.
#include "common/base/fd_passing.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

struct Pair {
  ScopedFd a, b;
};

Pair SeqPacketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0) << strerror(errno);
  return {ScopedFd(fds[0]), ScopedFd(fds[1])};
}

// How many descriptors this process has open.
int OpenFdCount() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += ::fcntl(fd, F_GETFD) != -1 ? 1 : 0;
  return n;
}

TEST(FdPassingTest, DescriptorArrivesWorkingAndCloseOnExec) {
  Pair p = SeqPacketPair();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ScopedFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  ASSERT_TRUE(SendWithFds(p.a.get(), "with a pipe", {write_end.get()}).ok());
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->eof);
  EXPECT_EQ(m->bytes, "with a pipe");
  ASSERT_EQ(m->fds.size(), 1u);
  EXPECT_NE(m->fds[0].get(), write_end.get());
  EXPECT_EQ(::fcntl(m->fds[0].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(m->fds[0].get(), "z", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(read_end.get(), &c, 1), 1);
  EXPECT_EQ(c, 'z');
}

TEST(FdPassingTest, MessageBoundariesHold) {
  Pair p = SeqPacketPair();
  ASSERT_TRUE(SendWithFds(p.a.get(), "one", {}).ok());
  ASSERT_TRUE(SendWithFds(p.a.get(), "two!", {}).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  EXPECT_EQ(ReceiveWithFds(p.b.get(), 64, 0, deadline)->bytes, "one");
  EXPECT_EQ(ReceiveWithFds(p.b.get(), 64, 0, deadline)->bytes, "two!");
}

TEST(FdPassingTest, TooManyDescriptorsAreRefusedAndClosed) {
  Pair p = SeqPacketPair();
  ScopedFd n1(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ScopedFd n2(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int before = OpenFdCount();
  ASSERT_TRUE(SendWithFds(p.a.get(), "two fds", {n1.get(), n2.get()}).ok());
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("more descriptors than the 1"));
  EXPECT_EQ(OpenFdCount(), before);  // none leaked into this process
  // Also when the receiver takes none at all.
  ASSERT_TRUE(SendWithFds(p.a.get(), "one fd", {n1.get()}).ok());
  m = ReceiveWithFds(p.b.get(), 64, 0, absl::Now() + absl::Seconds(30));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("more descriptors than the 0"));
  EXPECT_EQ(OpenFdCount(), before);
  // The socket stays in step: the next message reads whole.
  ASSERT_TRUE(SendWithFds(p.a.get(), "next", {}).ok());
  EXPECT_EQ(ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30))->bytes, "next");
}

TEST(FdPassingTest, TooLongIsRefusedWithItsDescriptorsClosed) {
  Pair p = SeqPacketPair();
  ScopedFd n(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int before = OpenFdCount();
  ASSERT_TRUE(SendWithFds(p.a.get(), std::string(100, 'x'), {n.get()}).ok());
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 10, 1, absl::Now() + absl::Seconds(30));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("longer than the 10 bytes"));
  EXPECT_EQ(OpenFdCount(), before);
}

TEST(FdPassingTest, DeadlineEndsTheWait) {
  Pair p = SeqPacketPair();
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(m.status())) << m.status();
  m = ReceiveWithFds(p.b.get(), 64, 1, absl::Now() - absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(m.status())) << m.status();
}

TEST(FdPassingTest, ClosedPeerIsEofAndSendingToItIsUnavailable) {
  Pair p = SeqPacketPair();
  p.a.Reset();
  absl::StatusOr<ReceivedMessage> m = ReceiveWithFds(p.b.get(), 64, 1, absl::InfiniteFuture());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->eof);
  absl::Status s = SendWithFds(p.b.get(), "anyone?", {});  // no SIGPIPE kills the test
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
}

// A peer that answers and closes without reading what it was sent (the handoff server's
// refusal past max_sessions) leaves a pending reset that Linux reports before the answer.
TEST(FdPassingTest, AnswerOfAPeerThatClosedUnreadIsReadBeforeTheEnd) {
  Pair p = SeqPacketPair();
  ASSERT_TRUE(SendWithFds(p.b.get(), "hello", {}).ok());  // never read by a
  ASSERT_TRUE(SendWithFds(p.a.get(), "refused", {}).ok());
  p.a.Reset();
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->eof);
  EXPECT_EQ(m->bytes, "refused");
  m = ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->eof);
}

// The same close with nothing sent back reads as the end, at once.
TEST(FdPassingTest, PeerThatClosedUnreadWithoutAnAnswerIsEof) {
  Pair p = SeqPacketPair();
  ASSERT_TRUE(SendWithFds(p.b.get(), "hello", {}).ok());
  p.a.Reset();
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->eof);
}

TEST(FdPassingTest, PeerCredentialsNameThisProcess) {
  Pair p = SeqPacketPair();
  absl::StatusOr<PeerCredentials> c = PeerCredentialsOf(p.a.get());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pid, ::getpid());
  EXPECT_EQ(c->uid, ::getuid());
  EXPECT_EQ(c->gid, ::getgid());
  ScopedFd not_socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(PeerCredentialsOf(not_socket.get()).ok());
}

// At its descriptor limit the receiver cannot take what a message carries: the bytes still
// come, marked, so that a server answers that request instead of dropping the connection.
TEST(FdPassingTest, DescriptorsThisProcessCannotTakeAreReportedLost) {
  Pair p = SeqPacketPair();
  ScopedFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(devnull.valid());
  ASSERT_TRUE(SendWithFds(p.a.get(), "carries one", {devnull.get()}).ok());
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<ScopedFd> filler;
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(OpenFdCount() + 8);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (;;) {
    ScopedFd fd(::dup(devnull.get()));
    if (!fd.valid()) break;
    filler.push_back(std::move(fd));
  }
  absl::StatusOr<ReceivedMessage> m =
      ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  filler.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->fds_lost);
  EXPECT_TRUE(m->fds.empty());
  EXPECT_EQ(m->bytes, "carries one");
  // The connection goes on.
  ASSERT_TRUE(SendWithFds(p.a.get(), "next", {devnull.get()}).ok());
  m = ReceiveWithFds(p.b.get(), 64, 1, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->fds_lost);
  EXPECT_EQ(m->fds.size(), 1u);
}

}  // namespace
}  // namespace gdr
