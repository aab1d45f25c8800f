// TcpTransport: matching, ordering, sizes, signatures, timeouts, aborts and peer loss, with
// ranks as threads of one process meeting through a HashStore.
#include "backends/tcp/tcp_transport.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/tcp/shm_arena.h"
#include "base/core/mutex.h"
#include "base/store/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/tls_certificates.h"

namespace plexus::tcp {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(20);

// Creates every rank at once; `shm(rank)`, when given, replaces the environment's
// shared-memory settings. Returns each rank's outcome.
std::vector<absl::StatusOr<std::unique_ptr<TcpTransport>>> TryWorld(
    int size, const std::string& group,
    const std::function<std::optional<ShmConfig>(int)>& shm = nullptr,
    const std::function<std::optional<absl::Duration>(int)>& heartbeat = nullptr,
    const std::function<std::string(int)>& secret = nullptr,
    absl::Duration connect_timeout = absl::Seconds(20),
    const std::function<auth::TlsFiles(int)>& tls = nullptr) {
  auto store = std::make_shared<HashStore>(absl::Seconds(20));
  std::vector<absl::StatusOr<std::unique_ptr<TcpTransport>>> world;
  for (int rank = 0; rank < size; ++rank) world.emplace_back(absl::UnknownError("not created"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      TcpTransportOptions options;
      options.store = store;
      options.rank = rank;
      options.size = size;
      options.group_name = group;
      options.address = "127.0.0.1";
      options.connect_timeout = connect_timeout;
      options.secret = secret ? secret(rank) : std::string();
      if (shm) options.shared_memory_config = shm(rank);
      if (heartbeat) options.heartbeat = heartbeat(rank);
      options.tls = tls ? tls(rank) : auth::TlsFiles{};
      world[rank] = TcpTransport::Create(options);
    });
  }
  for (auto& thread : threads) thread.join();
  return world;
}

std::vector<std::unique_ptr<TcpTransport>> MakeWorld(
    int size, const std::string& group = "g",
    const std::function<std::optional<ShmConfig>(int)>& shm = nullptr) {
  std::vector<std::unique_ptr<TcpTransport>> world;
  for (auto& transport : TryWorld(size, group, shm)) {
    EXPECT_TRUE(transport.ok()) << transport.status();
    world.push_back(transport.ok() ? std::move(transport).value() : nullptr);
  }
  return world;
}

// Every rank as if on a host of its own: frames go over the sockets.
std::optional<ShmConfig> SocketsOnly(int) { return ShmConfig{ShmMode::kOff}; }

// Busy until `until` (a rank computing, not a wait for anything).
void SpinUntil(absl::Time until) {
  while (absl::Now() < until) {
  }
}

absl::Span<const uint8_t> Bytes(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }
absl::Span<uint8_t> Bytes(std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(TcpTransportTest, SendsEverySizePrePostedAndUnexpected) {
  auto world = MakeWorld(2);
  ASSERT_NE(world[1], nullptr);
  uint32_t step = 0;
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}, size_t{8} << 20}) {
    for (bool pre_post : {true, false}) {
      const MessageTag tag{MakeTag(1, step++), 0};
      const std::vector<uint8_t> sent = Pattern(size, static_cast<uint8_t>(size));
      std::vector<uint8_t> received(size, 0xEE);
      WorkPtr recv;
      if (pre_post) recv = world[1]->Recv(0, tag, Bytes(received), kWait);
      WorkPtr send = world[0]->Send(1, tag, Bytes(sent), kWait);
      ASSERT_TRUE(send->Wait(kWait).ok());
      if (!pre_post) recv = world[1]->Recv(0, tag, Bytes(received), kWait);
      ASSERT_TRUE(recv->Wait(kWait).ok()) << size;
      EXPECT_EQ(received, sent) << size << (pre_post ? " pre-posted" : " unexpected");
      EXPECT_EQ(recv->stats().bytes_received, static_cast<int64_t>(size));
      EXPECT_EQ(send->stats().bytes_sent, static_cast<int64_t>(size));
    }
  }
}

TEST(TcpTransportTest, SameTagMessagesArriveInOrderAndTagsAreIndependent) {
  auto world = MakeWorld(2);
  constexpr int kMessages = 50;
  std::vector<std::vector<uint8_t>> sent;
  std::vector<WorkPtr> sends;
  for (int i = 0; i < kMessages; ++i) sent.push_back(Pattern(64 + i, static_cast<uint8_t>(i)));
  for (int i = 0; i < kMessages; ++i) {
    sends.push_back(world[0]->Send(1, {MakeTag(2, i % 2), 0}, Bytes(sent[i]), kWait));
  }
  // Receive tag 1 first, then tag 0: each tag's messages still arrive in send order.
  for (int parity : {1, 0}) {
    for (int i = parity; i < kMessages; i += 2) {
      std::vector<uint8_t> received(64 + i);
      ASSERT_TRUE(
          world[1]->Recv(0, {MakeTag(2, parity), 0}, Bytes(received), kWait)->Wait(kWait).ok());
      EXPECT_EQ(received, sent[i]) << i;
    }
  }
  EXPECT_TRUE(WaitAll(sends, kWait).ok());
}

// Several threads sending large messages to one peer at once: a frame written partly by one
// caller thread must not be overtaken on the wire by a frame another thread queued after it.
TEST(TcpTransportTest, ConcurrentSendersToOnePeerKeepTheStreamWhole) {
  auto world = MakeWorld(2);
  ASSERT_NE(world[1], nullptr);
  constexpr int kThreads = 8;
  constexpr int kMessages = 30;
  std::vector<std::vector<uint8_t>> payloads;
  for (int t = 0; t < kThreads; ++t) {
    payloads.push_back(Pattern((size_t{1} << 20) + 4099 * t, static_cast<uint8_t>(t * 31 + 1)));
  }
  std::vector<std::thread> receivers;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    receivers.emplace_back([&, t] {
      std::vector<uint8_t> received(payloads[t].size());
      for (int i = 0; i < kMessages; ++i) {
        std::fill(received.begin(), received.end(), 0);
        absl::Status status =
            world[1]->Recv(0, {MakeTag(10 + t, i), 0}, Bytes(received), kWait)->Wait(kWait);
        if (!status.ok() || received != payloads[t]) ++bad;
      }
    });
  }
  std::vector<std::thread> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.emplace_back([&, t] {
      for (int i = 0; i < kMessages; ++i) {
        if (!world[0]
                 ->Send(1, {MakeTag(10 + t, i), 0}, Bytes(payloads[t]), kWait)
                 ->Wait(kWait)
                 .ok()) {
          ++bad;
        }
      }
    });
  }
  for (auto& thread : senders) thread.join();
  for (auto& thread : receivers) thread.join();
  EXPECT_EQ(bad.load(), 0);
}

// Both ranks wait on a receive from each other at once over sockets only, as a small
// collective does. A waiter reads the awaited socket before asking epoll: the bytes may be
// there already, arrive during the wait, or (large messages) come in pieces.
TEST(TcpTransportTest, WaitersReadingTheirPeersSocketFirstGetEveryMessageWhole) {
  auto world = MakeWorld(2, "exchange", SocketsOnly);
  ASSERT_NE(world[1], nullptr);
  ASSERT_EQ(world[0]->shared_memory_peers(), 0);
  const std::vector<size_t> sizes = {1, 1024, 70000, size_t{3} << 20, 0, 4096};
  constexpr int kRounds = 240;
  std::atomic<int> bad{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      TcpTransport& me = *world[rank];
      const int peer = 1 - rank;
      for (int round = 0; round < kRounds; ++round) {
        const size_t size = sizes[round % sizes.size()];
        const MessageTag tag{MakeTag(3, round), 0};
        const std::vector<uint8_t> sent = Pattern(size, static_cast<uint8_t>(rank * 100 + round));
        std::vector<uint8_t> got(size, 0xEE);
        WorkPtr send;
        WorkPtr recv;
        // Who posts first alternates, and one rank sometimes dawdles before it waits, so the
        // peer's bytes are sometimes queued in the socket before the wait begins.
        if ((round + rank) % 2 == 0) {
          send = me.Send(peer, tag, Bytes(sent), kWait);
          recv = me.Recv(peer, tag, Bytes(got), kWait);
        } else {
          recv = me.Recv(peer, tag, Bytes(got), kWait);
          send = me.Send(peer, tag, Bytes(sent), kWait);
        }
        if (rank == round % 3) SpinUntil(absl::Now() + absl::Microseconds((round * 37) % 150));
        const absl::Status received = recv->Wait(kWait);
        const absl::Status delivered = send->Wait(kWait);
        if (!received.ok() || !delivered.ok() ||
            got != Pattern(size, static_cast<uint8_t>(peer * 100 + round))) {
          ++bad;
        }
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  EXPECT_EQ(bad.load(), 0);
}

// While callers poll back to back, the loop thread (which must still take over once they stop)
// looks less and less often instead of every millisecond; a receive nobody waits on, posted
// after such a stream, is still completed by it.
TEST(TcpTransportTest, WhileCallersPollTheLoopThreadLooksLessOftenAndStillTakesOver) {
  auto world = MakeWorld(2, "looks", SocketsOnly);
  ASSERT_NE(world[1], nullptr);
  const uint64_t looks_before = world[0]->loop_thread_looks();
  const absl::Duration stream = absl::Milliseconds(300);
  std::atomic<int> bad{0};
  std::atomic<int> rounds{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      TcpTransport& me = *world[rank];
      const absl::Time start = absl::Now();
      uint8_t out = static_cast<uint8_t>(rank);
      uint8_t in = 0;
      // Rank 0 decides when the stream ends and tells rank 1 in the last message.
      for (uint32_t round = 0;; ++round) {
        const bool last = rank == 0 && absl::Now() - start >= stream;
        if (rank == 0) out = last ? 0xFF : 0;
        const MessageTag tag{MakeTag(4, round), 0};
        WorkPtr send = me.Send(1 - rank, tag, {&out, 1}, kWait);
        WorkPtr recv = me.Recv(1 - rank, tag, {&in, 1}, kWait);
        if (!recv->Wait(kWait).ok() || !send->Wait(kWait).ok()) {
          ++bad;
          return;
        }
        if (rank == 0) ++rounds;
        if (last || (rank == 1 && in == 0xFF)) return;
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  ASSERT_EQ(bad.load(), 0);
  ASSERT_GT(rounds.load(), 10);
  // Every millisecond would be ~300 looks; doubling up to the longest look makes ~40.
  EXPECT_LT(world[0]->loop_thread_looks() - looks_before, 100u);

  // Nobody waits on this receive: the loop thread reads it once the callers have gone.
  std::vector<uint8_t> got(5000, 0);
  const std::vector<uint8_t> sent = Pattern(got.size(), 9);
  const MessageTag tag{MakeTag(5, 0), 0};
  WorkPtr recv = world[1]->Recv(0, tag, Bytes(got), kWait);
  ASSERT_TRUE(world[0]->Send(1, tag, Bytes(sent), kWait)->Wait(kWait).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!recv->IsCompleted() && absl::Now() < deadline) sched_yield();
  ASSERT_TRUE(recv->IsCompleted());
  EXPECT_TRUE(recv->status().ok()) << recv->status();
  EXPECT_EQ(got, sent);
}

TEST(TcpTransportTest, ASendLeftForItsCallersWaitStillMovesWhenNobodyWaits) {
  auto world = MakeWorld(2, "awaited", SocketsOnly);
  ASSERT_NE(world[1], nullptr);
  // Far more than loopback's socket buffers take at once: most of it is left to the loop.
  std::vector<uint8_t> got(64 << 20, 0);
  const std::vector<uint8_t> sent = Pattern(got.size(), 5);
  const MessageTag tag{MakeTag(6, 0), 0};
  WorkPtr send;
  {
    const ScopedSendsAwaited awaited;  // A hint only: this thread never waits on it.
    EXPECT_TRUE(SendsAwaitedByCaller());
    send = world[0]->Send(1, tag, Bytes(sent), kWait);
  }
  EXPECT_FALSE(SendsAwaitedByCaller());
  // Only rank 1 polls (its own sockets); rank 0's loop thread has to move the rest.
  WorkPtr recv = world[1]->Recv(0, tag, Bytes(got), kWait);
  ASSERT_TRUE(recv->Wait(absl::Seconds(10)).ok()) << recv->status();
  EXPECT_EQ(got, sent);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!send->IsCompleted() && absl::Now() < deadline) sched_yield();
  ASSERT_TRUE(send->IsCompleted());
  EXPECT_TRUE(send->status().ok()) << send->status();
}

// Works complete after the loop's lock is released, in the order they finished: a
// completion callback that waits for another thread to post a receive (which takes that lock)
// is not holding it up. Over sockets and over shared-memory rings.
TEST(TcpTransportTest, WorksCompleteOutsideTheLoopsLockInTheOrderTheyFinished) {
  for (bool sockets : {true, false}) {
    SCOPED_TRACE(sockets ? "sockets" : "rings");
    auto world = MakeWorld(2, sockets ? "sockets" : "rings", sockets ? SocketsOnly : nullptr);
    ASSERT_NE(world[1], nullptr);
    constexpr int kMessages = 8;
    std::vector<std::vector<uint8_t>> received(kMessages, std::vector<uint8_t>(32));
    Mutex mu;
    std::vector<int> order;
    std::thread other;
    std::atomic<bool> posted{false};
    bool posted_from_callback = false;
    WorkPtr late;
    std::vector<uint8_t> late_buffer(4);
    std::vector<WorkPtr> recvs;
    for (int i = 0; i < kMessages; ++i) {  // One tag: the messages finish in send order.
      recvs.push_back(world[1]->Recv(0, {MakeTag(4, 0), 0}, Bytes(received[i]), kWait));
      recvs.back()->OnComplete([&, i](const absl::Status&) {
        MutexLock lock(mu);
        order.push_back(i);
      });
    }
    recvs[0]->OnComplete([&](const absl::Status&) {
      other = std::thread([&] {
        late = world[1]->Recv(0, {MakeTag(4, 1), 0}, Bytes(late_buffer), kWait);
        posted = true;
      });
      const absl::Time until = absl::Now() + absl::Seconds(5);
      while (!posted && absl::Now() < until) sched_yield();
      posted_from_callback = posted.load();
    });
    std::vector<WorkPtr> sends;
    std::vector<std::vector<uint8_t>> sent;
    for (int i = 0; i < kMessages; ++i) sent.push_back(Pattern(32, static_cast<uint8_t>(i)));
    for (int i = 0; i < kMessages; ++i) {
      sends.push_back(world[0]->Send(1, {MakeTag(4, 0), 0}, Bytes(sent[i]), kWait));
    }
    ASSERT_TRUE(WaitAll(recvs, kWait).ok());
    EXPECT_TRUE(posted_from_callback) << "a receive posted from another thread waited for the "
                                         "completion callback: it ran under the loop's lock";
    other.join();
    std::vector<uint8_t> four = {4, 4, 4, 4};
    ASSERT_TRUE(world[0]->Send(1, {MakeTag(4, 1), 0}, Bytes(four), kWait)->Wait(kWait).ok());
    ASSERT_TRUE(late->Wait(kWait).ok());
    EXPECT_EQ(late_buffer, four);
    EXPECT_TRUE(WaitAll(sends, kWait).ok());
    for (int i = 0; i < kMessages; ++i) EXPECT_EQ(received[i], sent[i]) << i;
    std::vector<int> in_order(kMessages);
    std::iota(in_order.begin(), in_order.end(), 0);
    MutexLock lock(mu);
    EXPECT_EQ(order, in_order);
  }
}

TEST(TcpTransportTest, RecvFromAnyNamesTheSender) {
  auto world = MakeWorld(3);
  std::vector<uint8_t> from2 = {2, 2, 2};
  ASSERT_TRUE(world[2]->Send(0, {MakeTag(3, 0), 0}, Bytes(from2), kWait)->Wait(kWait).ok());
  std::vector<uint8_t> received(3);
  WorkPtr recv = world[0]->RecvFromAny({MakeTag(3, 0), 0}, Bytes(received), kWait);
  ASSERT_TRUE(recv->Wait(kWait).ok());
  EXPECT_EQ(recv->source_rank(), 2);
  EXPECT_EQ(received, from2);
  // Posted before the send.
  std::vector<uint8_t> later(3);
  WorkPtr pending = world[0]->RecvFromAny({MakeTag(3, 1), 0}, Bytes(later), kWait);
  std::vector<uint8_t> from1 = {1, 1, 1};
  ASSERT_TRUE(world[1]->Send(0, {MakeTag(3, 1), 0}, Bytes(from1), kWait)->Wait(kWait).ok());
  ASSERT_TRUE(pending->Wait(kWait).ok());
  EXPECT_EQ(pending->source_rank(), 1);
  EXPECT_EQ(later, from1);
}

TEST(TcpTransportTest, SizeAndSignatureDisagreementsFailClearly) {
  auto world = MakeWorld(2);
  std::vector<uint8_t> four(4, 1), eight(8, 0);
  ASSERT_TRUE(world[0]->Send(1, {MakeTag(4, 0), 0}, Bytes(four), kWait)->Wait(kWait).ok());
  absl::Status size = world[1]->Recv(0, {MakeTag(4, 0), 0}, Bytes(eight), kWait)->Wait(kWait);
  EXPECT_EQ(size.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(size.message(), HasSubstr("rank 0 sent 4 bytes but this rank expected 8"));
  EXPECT_EQ(eight, std::vector<uint8_t>(8, 0));  // Nothing written.

  ASSERT_TRUE(world[0]->Send(1, {MakeTag(4, 1), 0xAA}, Bytes(four), kWait)->Wait(kWait).ok());
  std::vector<uint8_t> out(4);
  absl::Status signature = world[1]->Recv(0, {MakeTag(4, 1), 0xBB}, Bytes(out), kWait)->Wait(kWait);
  EXPECT_EQ(signature.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(signature.message(), HasSubstr("rank 1 is running signature 0xbb"));
  EXPECT_THAT(signature.message(), HasSubstr("rank 0 is running signature 0xaa"));
  // A signature disagreement ends the whole operation...
  EXPECT_EQ(world[1]->Recv(0, {MakeTag(4, 3), 0xBB}, Bytes(out), kWait)->Wait(kWait).code(),
            absl::StatusCode::kFailedPrecondition);
  // ...and the connection stays usable for the next one.
  ASSERT_TRUE(world[0]->Send(1, {MakeTag(5, 0), 0}, Bytes(four), kWait)->Wait(kWait).ok());
  EXPECT_TRUE(world[1]->Recv(0, {MakeTag(5, 0), 0}, Bytes(out), kWait)->Wait(kWait).ok());
}

TEST(TcpTransportTest, TimedOutRecvLeavesTheStreamIntact) {
  auto world = MakeWorld(2);
  std::vector<uint8_t> buffer(16);
  const absl::Time start = absl::Now();
  absl::Status status =
      world[1]->Recv(0, {MakeTag(5, 0), 0}, Bytes(buffer), absl::Milliseconds(100))->Wait(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("recv from rank 0"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  std::vector<uint8_t> sent = Pattern(16, 3);
  ASSERT_TRUE(world[0]->Send(1, {MakeTag(5, 0), 0}, Bytes(sent), kWait)->Wait(kWait).ok());
  ASSERT_TRUE(world[1]->Recv(0, {MakeTag(5, 0), 0}, Bytes(buffer), kWait)->Wait(kWait).ok());
  EXPECT_EQ(buffer, sent);
}

TEST(TcpTransportTest, AbortOperationReachesPeers) {
  auto world = MakeWorld(3);
  std::vector<uint8_t> a(8), b(8);
  WorkPtr on1 = world[1]->Recv(2, {MakeTag(6, 0), 0}, Bytes(a), kWait);
  WorkPtr on2 = world[2]->Recv(1, {MakeTag(6, 0), 0}, Bytes(b), kWait);
  WorkPtr other = world[2]->Recv(1, {MakeTag(7, 0), 0}, Bytes(b), absl::Milliseconds(300));
  world[0]->AbortOperation(6, absl::FailedPreconditionError("rank 0 saw a mismatch"));
  for (const WorkPtr& work : {on1, on2}) {
    absl::Status status = work->Wait(kWait);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(status.message(), HasSubstr("rank 0 saw a mismatch"));
  }
  // Other operations are untouched, and later work on the aborted one fails at once.
  EXPECT_EQ(other->Wait(kWait).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(world[1]->Recv(2, {MakeTag(6, 1), 0}, Bytes(a), kWait)->Wait(kWait).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TcpTransportTest, CleanShutdownKeepsDeliveredMessagesAndTheRestOfTheGroup) {
  auto world = MakeWorld(3);
  std::vector<uint8_t> a(8), b(8);
  const std::vector<uint8_t> parting = Pattern(8, 42);
  ASSERT_TRUE(world[2]->Send(0, {MakeTag(8, 0), 0}, Bytes(parting), kWait)->Wait(kWait).ok());
  WorkPtr never = world[0]->Recv(2, {MakeTag(8, 1), 0}, Bytes(b), kWait);
  world[2].reset();  // Says goodbye, then closes.
  EXPECT_THAT(never->Wait(kWait).message(), HasSubstr("rank 2 has shut down"));
  // What rank 2 sent before leaving is still delivered.
  ASSERT_TRUE(world[0]->Recv(2, {MakeTag(8, 0), 0}, Bytes(a), kWait)->Wait(kWait).ok());
  EXPECT_EQ(a, parting);
  EXPECT_EQ(world[0]->Send(2, {MakeTag(8, 2), 0}, Bytes(a), kWait)->Wait(kWait).code(),
            absl::StatusCode::kUnavailable);
  // Ranks 0 and 1 carry on.
  WorkPtr recv = world[1]->Recv(0, {MakeTag(9, 0), 0}, Bytes(b), kWait);
  ASSERT_TRUE(world[0]->Send(1, {MakeTag(9, 0), 0}, Bytes(parting), kWait)->Wait(kWait).ok());
  ASSERT_TRUE(recv->Wait(kWait).ok());
  EXPECT_EQ(b, parting);
}

TEST(TcpTransportTest, GroupsDoNotCrossConnect) {
  auto store = std::make_shared<HashStore>(absl::Seconds(5));
  std::vector<absl::Status> results(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      TcpTransportOptions options;
      options.store = store;
      options.rank = rank;
      options.size = 2;
      options.group_name = rank == 0 ? "left" : "right";
      options.address = "127.0.0.1";
      options.connect_timeout = absl::Seconds(5);
      results[rank] = TcpTransport::Create(options).status();
    });
  }
  for (auto& thread : threads) thread.join();
  // The accepting rank drops the stranger (the real peer may still come) and, at its timeout,
  // says what it refused; the connecting one is turned away.
  EXPECT_FALSE(results[0].ok());
  EXPECT_THAT(results[0].message(), HasSubstr("closed the connection during the handshake"));
  EXPECT_EQ(results[1].code(), absl::StatusCode::kDeadlineExceeded) << results[1];
  EXPECT_THAT(results[1].message(), HasSubstr("belongs to another group"));
}

TEST(TcpTransportTest, SingleRankWorldNeedsNoSockets) {
  auto world = MakeWorld(1);
  ASSERT_NE(world[0], nullptr);
  std::vector<uint8_t> a(1);
  EXPECT_EQ(world[0]->Send(0, {MakeTag(1, 0), 0}, Bytes(a), kWait)->Wait(kWait).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace plexus::tcp

namespace plexus::tcp {
namespace {

// Ranks 0 and 1 share a "host", rank 2 is on another (PLEXUS_HOST_ID as the config's host_id):
// rings between 0 and 1, TCP to 2, the same host numbering everywhere, no arena (not every
// rank shares the host), and messages flow on every pair.
TEST(TcpTransportTest, SameHostPeersUseRingsAndTheRestTcp) {
  auto world = TryWorld(3, "hosts", [](int rank) {
    ShmConfig config;
    config.host_id = rank < 2 ? "a" : "b";
    return std::optional<ShmConfig>(config);
  });
  for (auto& transport : world) ASSERT_TRUE(transport.ok()) << transport.status();
  const std::vector<int> expected_peers = {1, 1, 0};
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ((*world[rank])->shared_memory_peers(), expected_peers[rank]) << "rank " << rank;
    EXPECT_THAT((*world[rank])->host_of(), ::testing::ElementsAre(0, 0, 1)) << "rank " << rank;
    EXPECT_EQ((*world[rank])->shared_arena(), nullptr) << "rank " << rank;
  }
  uint32_t step = 0;
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      std::vector<uint8_t> sent = Pattern(300000, static_cast<uint8_t>(from * 3 + to));
      std::vector<uint8_t> got(sent.size());
      const MessageTag tag{MakeTag(1, step++), 0};
      WorkPtr recv = (*world[to])->Recv(from, tag, Bytes(got), kWait);
      WorkPtr send = (*world[from])->Send(to, tag, Bytes(sent), kWait);
      ASSERT_TRUE(send->Wait(kWait).ok());
      ASSERT_TRUE(recv->Wait(kWait).ok());
      EXPECT_EQ(got, sent) << from << " -> " << to;
    }
  }
}

// PLEXUS_TRANSPORT=shm (mode kRequired) with a peer on another host: creation fails on both
// sides, naming the variable, the peer and why.
TEST(TcpTransportTest, RequiredSharedMemoryFailsNamingThePeerAndWhy) {
  auto world = TryWorld(2, "required", [](int rank) {
    ShmConfig config;
    config.mode = ShmMode::kRequired;
    config.host_id = rank == 0 ? "a" : "b";
    return std::optional<ShmConfig>(config);
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_FALSE(world[rank].ok()) << "rank " << rank;
    EXPECT_EQ(world[rank].status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(world[rank].status().message(),
                ::testing::AllOf(HasSubstr("PLEXUS_TRANSPORT=shm"),
                                 HasSubstr(absl::StrCat("rank ", 1 - rank, " cannot be reached")),
                                 HasSubstr("another host")));
  }
}

// A PLEXUS_WAIT it does not know fails the transport's creation, naming the value, instead of
// waiting in some way the user did not ask for.
TEST(TcpTransportTest, AnUnknownWaitModeFailsCreationNamingIt) {
  setenv("PLEXUS_WAIT", "yield", 1);
  auto world = TryWorld(1, "unknown-wait");
  unsetenv("PLEXUS_WAIT");
  ASSERT_FALSE(world[0].ok());
  EXPECT_EQ(world[0].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(world[0].status().message(), ::testing::AllOf(HasSubstr("PLEXUS_WAIT='yield'"),
                                                            HasSubstr("adaptive, spin or sleep")));
}

// The shared-memory sizes read byte counts as every other size does (base/core/byte_size.h).
TEST(TcpTransportTest, SharedMemorySizesTakeByteCountsWithUnits) {
  setenv("PLEXUS_SHM_RING_BYTES", "64K", 1);
  setenv("PLEXUS_SHM_ARENA_BYTES", "4MiB", 1);
  absl::StatusOr<ShmConfig> config = ShmConfigFromEnvironment();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ring_bytes, uint64_t{64} << 10);
  EXPECT_EQ(config->arena_bytes, uint64_t{4} << 20);
  setenv("PLEXUS_SHM_RING_BYTES", "4X", 1);
  config = ShmConfigFromEnvironment();
  unsetenv("PLEXUS_SHM_RING_BYTES");
  unsetenv("PLEXUS_SHM_ARENA_BYTES");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("PLEXUS_SHM_RING_BYTES='4X'"));
}

// Every rank on one host: the arena is offered, and a rank that shuts down marks itself gone
// there (a peer waiting on it stops at once instead of at its deadline).
TEST(TcpTransportTest, OneHostOffersAnArenaThatALeavingRankCloses) {
  auto world = MakeWorld(2, "arena");
  ASSERT_NE(world[1], nullptr);
  SharedArena* arena = world[0]->shared_arena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->size(), 2);
  EXPECT_EQ(world[0]->shared_memory_peers(), 1);
  world[1].reset();  // Clean shutdown.
  absl::StatusOr<uint64_t> seen =
      arena->WaitFor(1, 1000, absl::Now() + kWait, [](uint64_t) { return false; });
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_NE(*seen & kArenaFailed, 0u);
  EXPECT_EQ(ArenaFailureCode(*seen), absl::StatusCode::kUnavailable);
}

// Publishing is a plain store and a waiter going to sleep fences every core instead: a publish
// at any moment around a waiter's spin-to-sleep handover still wakes it at once. A missed
// wake would cost the waiter its whole sleep (100 ms, then it looks again).
TEST(TcpTransportTest, ArenaWaitersWakeForPublishesAroundTheirSleep) {
  auto world = MakeWorld(2, "wake");
  ASSERT_NE(world[1], nullptr);
  SharedArena* waiter = world[0]->shared_arena();
  SharedArena* publisher = world[1]->shared_arena();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(publisher, nullptr);
  constexpr int kRounds = 60;
  std::atomic<int> waiting{0};
  std::thread publishing([&] {
    for (int round = 1; round <= kRounds; ++round) {
      while (waiting.load() < round) std::this_thread::yield();
      // 0 to 118 us after the wait began: around the 50 us spin that precedes the sleep.
      SpinUntil(absl::Now() + absl::Microseconds((round * 37) % 120));
      publisher->Publish(static_cast<uint64_t>(round));
    }
  });
  absl::Duration slowest;
  for (int round = 1; round <= kRounds; ++round) {
    const absl::Time start = absl::Now();
    waiting.store(round);
    absl::StatusOr<uint64_t> seen = waiter->WaitFor(1, static_cast<uint64_t>(round), start + kWait,
                                                    [](uint64_t) { return false; });
    ASSERT_TRUE(seen.ok()) << seen.status();
    ASSERT_EQ(*seen, static_cast<uint64_t>(round));
    slowest = std::max(slowest, absl::Now() - start);
  }
  publishing.join();
  EXPECT_LT(slowest, absl::Milliseconds(90)) << "a publish went unnoticed until the next look";
}

// Ranks that could each have a core but wait on the same one hand it back and forth at every
// step; a waiter whose peer last waited on its own CPU moves to another, and its affinity is
// left as it was.
TEST(TcpTransportTest, ArenaWaiterSharingItsPeersCpuMovesToAnother) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs to move between";
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  auto pin = [](int only) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(only, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
  };
  auto world = MakeWorld(2, "crowded");
  ASSERT_NE(world[1], nullptr);
  auto* waiter = dynamic_cast<ShmArena*>(world[0]->shared_arena());
  SharedArena* peer = world[1]->shared_arena();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(peer, nullptr);
  auto never = [](uint64_t) { return false; };
  // Rank 1 waits on `cpu` past the plain spin (for a step that never comes), which records it;
  // then rank 0 waits on the same CPU, free to run on any. Once its affinity is wide again the
  // kernel may move it before it looks (the machine is busy running other tests), so the pair
  // tries a few times; a waiter that never moves fails them all.
  for (int attempt = 0; attempt < 20 && waiter->moves() == 0; ++attempt) {
    std::thread waiting_peer([&] {
      ASSERT_TRUE(pin(cpu));
      EXPECT_TRUE(absl::IsDeadlineExceeded(
          peer->WaitFor(0, 1, absl::Now() + absl::Milliseconds(2), never).status()));
    });
    waiting_peer.join();
    ASSERT_TRUE(pin(cpu));
    ASSERT_EQ(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
    EXPECT_TRUE(absl::IsDeadlineExceeded(
        waiter->WaitFor(1, 1, absl::Now() + absl::Milliseconds(5), never).status()));
  }
  EXPECT_EQ(waiter->moves(), 1);
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &allowed)) << "the waiter's affinity changed";
}

// Peers that are idle still beat: a quiet spell of many intervals loses nobody.
TEST(TcpTransportTest, IdlePeersOutliveManyHeartbeatIntervals) {
  for (ShmMode mode : {ShmMode::kOff, ShmMode::kRequired}) {
    auto world = TryWorld(
        2, absl::StrCat("idle", static_cast<int>(mode)), [mode](int) { return ShmConfig{mode}; },
        [](int) { return absl::Milliseconds(200); });
    ASSERT_TRUE(world[0].ok() && world[1].ok());
    absl::SleepFor(absl::Seconds(1));  // Five intervals with nothing to send.
    std::vector<uint8_t> sent = Pattern(1000, 3), received(1000);
    WorkPtr recv = (*world[1])->Recv(0, {MakeTag(1, 0), 0}, Bytes(received), kWait);
    ASSERT_TRUE((*world[0])->Send(1, {MakeTag(1, 0), 0}, Bytes(sent), kWait)->Wait(kWait).ok());
    absl::Status status = recv->Wait(kWait);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(received, sent);
  }
}

// A peer that sends nothing (here: one that never beats, as a stopped process would not) is
// lost after the interval: a pending receive from it fails Unavailable, naming it and why.
TEST(TcpTransportTest, ASilentPeerIsLostAfterTheHeartbeatInterval) {
  for (ShmMode mode : {ShmMode::kOff, ShmMode::kRequired}) {
    auto world = TryWorld(
        2, absl::StrCat("silent", static_cast<int>(mode)), [mode](int) { return ShmConfig{mode}; },
        [](int rank) { return rank == 0 ? absl::Milliseconds(300) : absl::InfiniteDuration(); });
    ASSERT_TRUE(world[0].ok() && world[1].ok());
    std::vector<uint8_t> received(10);
    const absl::Time start = absl::Now();
    WorkPtr recv = (*world[0])->Recv(1, {MakeTag(1, 0), 0}, Bytes(received), kWait);
    absl::Status status = recv->Wait(kWait);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("lost rank 1"));
    EXPECT_THAT(status.message(), HasSubstr("heartbeat"));
    EXPECT_LT(took, absl::Seconds(3)) << "detected after " << took;
  }
}

// With a shared secret every connection of the mesh is authenticated both ways; a rank with
// another secret is refused: it fails naming the peer, and the peer it tried drops the
// connection and keeps waiting for the real rank, naming the refusal when its time is up.
TEST(TcpTransportTest, TheMeshAuthenticatesEveryConnectionWithTheSharedSecret) {
  const std::string secret = "sixteen bytes or more of secret";
  auto same = TryWorld(3, "auth_ok", nullptr, nullptr, [&](int) { return secret; });
  for (auto& rank : same) ASSERT_TRUE(rank.ok()) << rank.status();
  std::vector<uint8_t> sent = Pattern(100, 9), received(100);
  WorkPtr recv = (*same[2])->Recv(0, {MakeTag(1, 0), 0}, Bytes(received), kWait);
  ASSERT_TRUE((*same[0])->Send(2, {MakeTag(1, 0), 0}, Bytes(sent), kWait)->Wait(kWait).ok());
  ASSERT_TRUE(recv->Wait(kWait).ok());
  EXPECT_EQ(received, sent);

  auto mixed = TryWorld(
      2, "auth_wrong", nullptr, nullptr,
      [&](int rank) { return rank == 0 ? std::string("a different secret, as long") : secret; },
      absl::Seconds(3));
  EXPECT_EQ(mixed[0].status().code(), absl::StatusCode::kUnauthenticated) << mixed[0].status();
  EXPECT_THAT(mixed[0].status().message(), HasSubstr("does not know the shared secret"));
  EXPECT_EQ(mixed[1].status().code(), absl::StatusCode::kDeadlineExceeded) << mixed[1].status();
  EXPECT_THAT(mixed[1].status().message(), HasSubstr("last refused: 127.0.0.1:"));

  auto without = TryWorld(
      2, "auth_none", nullptr, nullptr,
      [&](int rank) { return rank == 0 ? std::string() : secret; }, absl::Seconds(3));
  EXPECT_FALSE(without[0].ok());
  EXPECT_THAT(without[1].status().message(), HasSubstr("sent no authentication"));
}

// TLS on every connection: frames of every size cross intact both ways at once (sockets fill
// and records go out in pieces), shared memory stays in use for same-host peers when allowed,
// and a rank whose certificate another CA signed, or that speaks no TLS, is refused.
TEST(TcpTransportTest, TlsMeshesCarryEverySizeAndRefuseForeignCertificates) {
  const std::string directory = std::getenv("TEST_TMPDIR");
  ASSERT_TRUE(plexus::testing::WriteTlsCertificates(directory, {"rank"}).ok());
  const auth::TlsFiles good{directory + "/rank.pem", directory + "/rank.key",
                            directory + "/ca.pem"};
  const auth::TlsFiles rogue{directory + "/rogue.pem", directory + "/rogue.key",
                             directory + "/ca.pem"};
  const std::string secret = "sixteen bytes or more of secret";
  for (ShmMode mode : {ShmMode::kOff, ShmMode::kRequired}) {
    auto world = TryWorld(
        3, absl::StrCat("tls", static_cast<int>(mode)), [mode](int) { return ShmConfig{mode}; },
        nullptr, [&](int) { return secret; }, absl::Seconds(20), [&](int) { return good; });
    for (auto& rank : world) ASSERT_TRUE(rank.ok()) << rank.status();
    EXPECT_EQ((*world[0])->shared_memory_peers(), mode == ShmMode::kOff ? 0 : 2);
    uint32_t step = 0;
    for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}, size_t{8} << 20}) {
      // Ranks 0 and 1 exchange at once while rank 2 sends to 0 unexpectedly.
      std::vector<uint8_t> to1 = Pattern(size, 1), to0 = Pattern(size, 2), from2 = Pattern(size, 3);
      std::vector<uint8_t> at1(size), at0(size), at0_from2(size);
      const MessageTag tag{MakeTag(1, ++step), 0};
      WorkPtr s2 = (*world[2])->Send(0, tag, Bytes(from2), kWait);
      WorkPtr r1 = (*world[1])->Recv(0, tag, Bytes(at1), kWait);
      WorkPtr r0 = (*world[0])->Recv(1, tag, Bytes(at0), kWait);
      WorkPtr s0 = (*world[0])->Send(1, tag, Bytes(to1), kWait);
      WorkPtr s1 = (*world[1])->Send(0, tag, Bytes(to0), kWait);
      for (const WorkPtr& work : {s0, s1, r0, r1, s2}) ASSERT_TRUE(work->Wait(kWait).ok());
      ASSERT_TRUE((*world[0])->Recv(2, tag, Bytes(at0_from2), kWait)->Wait(kWait).ok());
      EXPECT_EQ(at1, to1) << size;
      EXPECT_EQ(at0, to0) << size;
      EXPECT_EQ(at0_from2, from2) << size;
    }
  }

  auto foreign = TryWorld(
      2, "tls_foreign", [](int) { return ShmConfig{ShmMode::kOff}; }, nullptr, nullptr,
      absl::Seconds(3), [&](int rank) { return rank == 0 ? rogue : good; });
  // TLS 1.3 clients finish before the server judges their certificate: rank 0 learns of the
  // refusal from the server's alert, or from the closed connection.
  EXPECT_THAT(foreign[0].status().message(),
              ::testing::AnyOf(HasSubstr("unknown ca"), HasSubstr("refused this rank")))
      << foreign[0].status();
  EXPECT_EQ(foreign[1].status().code(), absl::StatusCode::kDeadlineExceeded) << foreign[1].status();
  EXPECT_THAT(foreign[1].status().message(), HasSubstr("certificate"));

  auto clear_text = TryWorld(
      2, "tls_clear", [](int) { return ShmConfig{ShmMode::kOff}; }, nullptr, nullptr,
      absl::Seconds(3), [&](int rank) { return rank == 0 ? auth::TlsFiles{} : good; });
  EXPECT_FALSE(clear_text[0].ok());
  EXPECT_FALSE(clear_text[1].ok());
  EXPECT_THAT(clear_text[1].status().message(), HasSubstr("TLS"));
}

}  // namespace
}  // namespace plexus::tcp
