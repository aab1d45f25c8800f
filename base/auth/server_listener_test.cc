// ServerListener as the event-loop servers drive it: connections handed over with their ids,
// strangers closed when their admission takes too long, the bound on strangers at once (the
// listener leaves the rest in its backlog until one settles), and the deadlines the loop sleeps
// to. Shedding when the process is out of descriptors is exercised through each server:
// tcp_store_descriptors_test, master_descriptors_test, mesh_descriptors_test.
#include "base/auth/server_listener.h"

#include <map>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus::auth {
namespace {

ServerListener::Options Named(absl::Duration admission_timeout = absl::Seconds(10),
                              size_t most_strangers = 1000) {
  ServerListener::Options options;
  options.server = "test server";
  options.admission_timeout = admission_timeout;
  options.most_strangers = most_strangers;
  return options;
}

class ServerListenerTest : public ::testing::Test {
 protected:
  void Start(ServerListener::Options options) {
    auto poller = EventPoller::Create();
    ASSERT_TRUE(poller.ok()) << poller.status();
    poller_ = std::move(poller).value();
    auto fd = ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(fd.ok()) << fd.status();
    auto port = LocalPort(fd->get());
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    listener_ = std::make_unique<ServerListener>(
        std::move(fd).value(), *poller_, std::move(options),
        [this](uint64_t id, std::unique_ptr<ServerConnection> stream) {
          adopted_[id] = std::move(stream);
        },
        [this](uint64_t id, const std::string& reason) {
          closed_[id] = reason;
          adopted_.erase(id);
          listener_->Settle(id);
        });
  }

  void Connect() {
    auto fd = ConnectTcpWithRetry("127.0.0.1", port_, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(fd.ok()) << fd.status();
    clients_.push_back(std::move(fd).value());
  }

  // One turn of a server's loop: sleep to the listener's deadline (at most `most`), accept,
  // tick.
  void Turn(absl::Duration most) {
    bool ready = false;
    ASSERT_TRUE(poller_
                    ->Wait(std::min(absl::Now() + most, listener_->NextDeadline()),
                           [&](uint64_t tag, uint32_t) { ready = ready || tag == 0; })
                    .ok());
    if (ready) listener_->AcceptAll();
    listener_->Tick();
  }

  // Turns until `done` holds, for up to 10 s.
  template <typename Done>
  bool TurnUntil(Done done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done() && absl::Now() < deadline) Turn(absl::Milliseconds(100));
    return done();
  }

  std::unique_ptr<EventPoller> poller_;
  std::unique_ptr<ServerListener> listener_;
  int port_ = 0;
  std::vector<ScopedFd> clients_;
  std::map<uint64_t, std::unique_ptr<ServerConnection>> adopted_;
  std::map<uint64_t, std::string> closed_;
};

TEST_F(ServerListenerTest, HandsOverConnectionsWithIdsFromOneAsStrangersUntilSettled) {
  Start(Named());
  Connect();
  Connect();
  ASSERT_TRUE(TurnUntil([&] { return adopted_.size() == 2; }));
  EXPECT_EQ(adopted_.begin()->first, 1u);
  EXPECT_EQ(adopted_.rbegin()->first, 2u);
  EXPECT_EQ(listener_->strangers(), 2u);
  listener_->Settle(1);
  listener_->Settle(1);  // Twice is harmless.
  EXPECT_EQ(listener_->strangers(), 1u);
  EXPECT_TRUE(closed_.empty());
}

TEST_F(ServerListenerTest, ClosesAStrangerPastItsAdmissionTimeoutButNotASettledOne) {
  Start(Named(absl::Milliseconds(300)));
  Connect();
  Connect();
  ASSERT_TRUE(TurnUntil([&] { return adopted_.size() == 2; }));
  listener_->Settle(1);  // Through its hello.
  const absl::Time start = absl::Now();
  ASSERT_TRUE(TurnUntil([&] { return closed_.count(2) == 1; }));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(closed_[2], "no handshake within 300ms");
  EXPECT_EQ(closed_.count(1), 0u);
  EXPECT_EQ(listener_->strangers(), 0u);
  // With no stranger left, nothing is due.
  EXPECT_EQ(listener_->NextDeadline(), absl::InfiniteFuture());
}

TEST_F(ServerListenerTest, AtMostStrangersTheRestWaitInTheBacklogUntilOneSettles) {
  Start(Named(absl::Seconds(10), 2));
  for (int i = 0; i < 4; ++i) Connect();
  ASSERT_TRUE(TurnUntil([&] { return adopted_.size() == 2; }));
  for (int i = 0; i < 3; ++i) Turn(absl::Milliseconds(50));  // The listener is off: no more.
  EXPECT_EQ(adopted_.size(), 2u);
  EXPECT_EQ(listener_->strangers(), 2u);
  listener_->Settle(1);
  ASSERT_TRUE(TurnUntil([&] { return adopted_.size() == 3; }));
  EXPECT_EQ(listener_->strangers(), 2u);
  listener_->Settle(2);
  listener_->Settle(3);
  ASSERT_TRUE(TurnUntil([&] { return adopted_.size() == 4; }));
  EXPECT_TRUE(closed_.empty());
}

}  // namespace
}  // namespace plexus::auth
