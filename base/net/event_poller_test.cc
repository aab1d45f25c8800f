#include "base/net/event_poller.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

using Ready = std::vector<std::pair<uint64_t, uint32_t>>;

Ready WaitFor(EventPoller& poller, absl::Duration timeout) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  Ready ready;
  EXPECT_TRUE(
      poller.Wait(deadline, [&](uint64_t tag, uint32_t events) { ready.emplace_back(tag, events); })
          .ok());
  return ready;
}

TEST(EventPollerTest, HandsOverReadySocketsByTagAndFollowsChanges) {
  auto poller = EventPoller::Create();
  ASSERT_TRUE(poller.ok()) << poller.status();
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  ScopedFd watched(fds[0]), other(fds[1]);
  (*poller)->Watch(watched.get(), 7, EPOLLIN);
  EXPECT_TRUE(WaitFor(**poller, absl::ZeroDuration()).empty());  // Nothing to read yet.
  ASSERT_EQ(write(other.get(), "x", 1), 1);
  Ready ready = WaitFor(**poller, absl::Seconds(1));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 7u);
  EXPECT_TRUE(ready[0].second & EPOLLIN);
  (*poller)->Change(watched.get(), 7, 0);  // Off for now: the byte waits unreported.
  EXPECT_TRUE(WaitFor(**poller, absl::ZeroDuration()).empty());
  (*poller)->Change(watched.get(), 8, EPOLLIN | EPOLLOUT);
  ready = WaitFor(**poller, absl::Seconds(1));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].first, 8u);
  EXPECT_TRUE((ready[0].second & EPOLLIN) && (ready[0].second & EPOLLOUT));
  (*poller)->Forget(watched.get());
  EXPECT_TRUE(WaitFor(**poller, absl::ZeroDuration()).empty());
}

TEST(EventPollerTest, WakeEndsAWaitWithoutLimitAndReportsNothing) {
  auto poller = EventPoller::Create();
  ASSERT_TRUE(poller.ok()) << poller.status();
  std::thread waker([&] { (*poller)->Wake(); });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(WaitFor(**poller, absl::InfiniteDuration()).empty());
  waker.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(WaitFor(**poller, absl::ZeroDuration()).empty());  // The wake-up was consumed.
}

}  // namespace
}  // namespace plexus
