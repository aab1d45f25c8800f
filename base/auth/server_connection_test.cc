// ServerConnection's non-blocking I/O as the event-loop servers drive it: reads up to a limit,
// the peer's close, output queued behind a full socket and sent when the poller says it is
// writable, a failed send, output queued before TLS is up that arrives inside it, when a
// heartbeat is due, and the hand-over of the socket and its session (Release).
#include "base/auth/server_connection.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/tls_contexts.h"

namespace plexus::auth {
namespace {

using ReadEnd = ServerConnection::ReadEnd;

constexpr uint64_t kTag = 7;

// Blocks (by poll, up to 10 s) until `fd` is ready for `events`.
void AwaitReady(int fd, short events) {
  pollfd ready{fd, events, 0};
  ASSERT_EQ(poll(&ready, 1, 10'000), 1) << "socket not ready within 10 s";
}

class ServerConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    client_fd_.Reset(fds[0]);
    server_ = ServerConnection::Accept(ScopedFd(fds[1]), nullptr, "", Purpose::kStore);
    ASSERT_NE(server_, nullptr);
  }

  // Everything the client end can read within 10 s, up to `size` bytes.
  std::string ClientReads(size_t size) {
    std::string got;
    char buffer[65536];
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (got.size() < size && absl::Now() < deadline) {
      const ssize_t n = recv(client_fd_.get(), buffer, sizeof(buffer), 0);
      if (n > 0) got.append(buffer, static_cast<size_t>(n));
      if (n == 0) break;
      if (n < 0) AwaitReady(client_fd_.get(), POLLIN);
    }
    return got;
  }

  ScopedFd client_fd_;
  std::unique_ptr<ServerConnection> server_;
};

TEST_F(ServerConnectionTest, ReadsWhatArrivedThenSeesTheClose) {
  ASSERT_EQ(send(client_fd_.get(), "hello", 5, 0), 5);
  const ServerConnection::ReadOutcome first = server_->ReadAvailable(4096);
  EXPECT_EQ(first.end, ReadEnd::kDrained);
  EXPECT_EQ(first.bytes, 5u);
  EXPECT_EQ(server_->input(), "hello");
  server_->input().clear();

  const ServerConnection::ReadOutcome idle = server_->ReadAvailable(4096);
  EXPECT_EQ(idle.end, ReadEnd::kDrained);
  EXPECT_EQ(idle.bytes, 0u);

  client_fd_.Reset();
  EXPECT_EQ(server_->ReadAvailable(4096).end, ReadEnd::kClosed);
}

TEST_F(ServerConnectionTest, StopsReadingPastTheLimit) {
  const std::string flood(10'000, 'x');
  ASSERT_EQ(send(client_fd_.get(), flood.data(), flood.size(), 0),
            static_cast<ssize_t>(flood.size()));
  const ServerConnection::ReadOutcome read = server_->ReadAvailable(4096);
  EXPECT_EQ(read.end, ReadEnd::kOverLimit);
  EXPECT_GT(server_->input().size(), 4096u);
}

TEST_F(ServerConnectionTest, OutputBeyondTheSocketsRoomWaitsForTheWritableEvent) {
  std::string message(8 << 20, '\0');
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(server_->Send(message)) << server_->error();
  ASSERT_GT(server_->queued_bytes(), 0u) << "a socket pair took 8 MiB at once";
  EXPECT_TRUE(server_->wants_write());

  auto poller = EventPoller::Create();
  ASSERT_TRUE(poller.ok()) << poller.status();
  (*poller)->Watch(server_->fd(), kTag, EPOLLIN);
  server_->UpdateWatch(**poller, kTag);

  std::string received;
  std::thread reader([&] { received = ClientReads(message.size()); });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (server_->wants_write() && absl::Now() < deadline) {
    bool writable = false;
    ASSERT_TRUE((*poller)
                    ->Wait(absl::Now() + absl::Seconds(1),
                           [&](uint64_t tag, uint32_t events) {
                             EXPECT_EQ(tag, kTag);
                             writable = writable || (events & EPOLLOUT) != 0;
                           })
                    .ok());
    if (!writable) continue;
    ASSERT_TRUE(server_->Flush()) << server_->error();
    server_->UpdateWatch(**poller, kTag);
  }
  reader.join();
  EXPECT_FALSE(server_->wants_write());
  EXPECT_EQ(server_->queued_bytes(), 0u);
  EXPECT_TRUE(received == message)
      << "received " << received.size() << " of " << message.size() << " bytes, or other bytes";
}

// The servers' timers read these: bytes arriving move last_heard, bytes queued move last_sent,
// and a flush with nothing new moves neither.
TEST_F(ServerConnectionTest, RecordsWhenBytesLastMovedEachWay) {
  const absl::Time opened = server_->opened();
  EXPECT_EQ(server_->last_heard(), opened);
  EXPECT_EQ(server_->last_sent(), opened);
  // The clock moves past `opened` before any bytes do.
  while (absl::Now() <= opened) {
  }

  ASSERT_EQ(send(client_fd_.get(), "x", 1, 0), 1);
  ASSERT_EQ(server_->ReadAvailable(4096).end, ReadEnd::kDrained);
  const absl::Time heard = server_->last_heard();
  EXPECT_GT(heard, opened);
  EXPECT_EQ(server_->last_sent(), opened);

  ASSERT_TRUE(server_->Flush());
  EXPECT_EQ(server_->last_sent(), opened) << "a flush with nothing queued counted as sending";
  ASSERT_TRUE(server_->Send("y"));
  EXPECT_GT(server_->last_sent(), opened);
  EXPECT_EQ(server_->last_heard(), heard);
  EXPECT_EQ(server_->opened(), opened);
}

// A quiet connection owes a beat `period` after its last bytes out, a busy one none: output
// still queued reaches the peer anyway.
TEST_F(ServerConnectionTest, ABeatIsDueAPeriodAfterTheLastBytesOutAndNotWhileOutputWaits) {
  const absl::Duration period = absl::Seconds(2);
  const absl::Time sent = server_->last_sent();
  EXPECT_EQ(server_->NextBeat(period), sent + period);
  EXPECT_FALSE(server_->BeatDue(sent + period - absl::Nanoseconds(1), period));
  EXPECT_TRUE(server_->BeatDue(sent + period, period));
  EXPECT_EQ(server_->NextBeat(absl::InfiniteDuration()), absl::InfiniteFuture());

  ASSERT_TRUE(server_->Send(std::string(8 << 20, 'z'))) << server_->error();
  ASSERT_GT(server_->queued_bytes(), 0u) << "a socket pair took 8 MiB at once";
  EXPECT_EQ(server_->NextBeat(period), absl::InfiniteFuture());
  EXPECT_FALSE(server_->BeatDue(server_->last_sent() + 10 * period, period));

  server_->DiscardOutput();
  EXPECT_EQ(server_->NextBeat(period), server_->last_sent() + period);
}

TEST_F(ServerConnectionTest, ReleaseHandsOverTheSocketForBlockingUse) {
  const int fd = server_->fd();
  Connection connection = server_->Release();
  EXPECT_EQ(connection.fd.get(), fd);
  EXPECT_EQ(connection.cipher, nullptr);  // In the clear.
  EXPECT_EQ(server_->fd(), -1);
  ASSERT_TRUE(SendAll(connection.fd.get(), nullptr, "after", absl::Now() + absl::Seconds(10)).ok());
  EXPECT_EQ(ClientReads(5), "after");
}

TEST_F(ServerConnectionTest, ASendToAGonePeerFailsNamingWhy) {
  client_fd_.Reset();
  EXPECT_FALSE(server_->Send("anyone there?"));
  EXPECT_THAT(server_->error(), ::testing::HasSubstr("pipe"));
}

TEST(ServerConnectionTlsTest, OutputQueuedBeforeTheHandshakeAndAfterReleaseArrivesInside) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  ScopedFd client_fd(fds[0]);
  const std::shared_ptr<const TlsContext> server_tls = plexus::testing::TestTlsContext("server");
  const std::shared_ptr<const TlsContext> client_tls = plexus::testing::TestTlsContext("client");
  ASSERT_NE(server_tls, nullptr);
  ASSERT_NE(client_tls, nullptr);
  auto server = ServerConnection::Accept(ScopedFd(fds[1]), server_tls.get(), "", Purpose::kStore);
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(server->admission().secure());
  // Held back: in the clear these bytes would break the client's handshake.
  ASSERT_TRUE(server->Send("before the channel"));
  EXPECT_EQ(server->queued_bytes(), 18u);

  absl::Status client_status;
  std::string client_got;
  std::thread client([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    auto session = client_tls->Secure(client_fd.get(), TlsContext::Role::kClient, "test", deadline);
    client_status = session.status();
    if (!session.ok()) return;
    char buffer[64];
    while (client_got.size() < 24 && absl::Now() < deadline) {
      const ssize_t n = (*session)->Read(buffer, sizeof(buffer));
      if (n > 0) client_got.append(buffer, static_cast<size_t>(n));
      if (n == 0) break;
      if (n < 0) AwaitReady(client_fd.get(), POLLIN);
    }
  });

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server->admission().secure() && absl::Now() < deadline) {
    const ServerAdmission::Step step = server->admission().AdvanceTls();
    ASSERT_NE(step, ServerAdmission::Step::kRejected) << server->admission().reason();
    if (step == ServerAdmission::Step::kNeedMore) {
      AwaitReady(server->fd(), server->admission().wants_write() ? POLLOUT : POLLIN);
    }
  }
  ASSERT_TRUE(server->admission().secure());
  while (server->has_output() && absl::Now() < deadline) {
    ASSERT_TRUE(server->Flush()) << server->error();
    if (server->has_output()) AwaitReady(server->fd(), POLLOUT);
  }
  // Handed over, the session carries on where the connection left off.
  Connection released = server->Release();
  ASSERT_NE(released.cipher, nullptr);
  EXPECT_TRUE(SendAll(released.fd.get(), released.cipher.get(), "+after", deadline).ok());
  client.join();
  ASSERT_TRUE(client_status.ok()) << client_status;
  EXPECT_EQ(client_got, "before the channel+after");
}

}  // namespace
}  // namespace plexus::auth
