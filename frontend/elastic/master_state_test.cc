// MasterState without sockets: how update_topology rounds settle when peers are in different
// calls, that the per-call state it holds stays bounded, and that waits past their deadline are
// answered with the peers they waited for.
#include "frontend/elastic/master_state.h"

#include <map>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus::elastic {
namespace {

struct Replies {
  // Request id -> (status code, value) for each reply `peer` got.
  std::map<int64_t, std::pair<int64_t, int64_t>> by_request;
  std::vector<std::string> texts;
};

class MasterStateTest : public ::testing::Test {
 protected:
  MasterState state_{/*store_port=*/1, absl::Seconds(5)};
  std::map<int64_t, Replies> replies_;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> turns_;  // Peer -> (tag, turn).
  std::map<int64_t, std::vector<std::string>> outcomes_;               // Peer -> error texts.
  int64_t next_request_ = 100;

  void Drain() {
    for (auto& out : state_.TakeOutgoing()) {
      if (out.message.type == MessageType::kOpTurn) {
        turns_[out.peer].push_back({out.message.ints[2], out.message.ints[kOpKeyInts]});
      }
      if (out.message.type == MessageType::kOpOutcome)
        outcomes_[out.peer].push_back(out.message.text);
      if (out.message.type != MessageType::kReply) continue;
      Replies& r = replies_[out.peer];
      r.by_request[out.message.ints[0]] = {out.message.ints[1], out.message.ints[2]};
      r.texts.push_back(out.message.text);
    }
  }
  // Sends a request; returns its id.
  int64_t Send(int64_t peer, MessageType type, std::vector<int64_t> after_id = {}) {
    const int64_t id = next_request_++;
    after_id.insert(after_id.begin(), id);
    EXPECT_TRUE(state_.Handle(peer, Message{type, after_id, ""}).ok());
    Drain();
    return id;
  }
  bool Answered(int64_t peer, int64_t request) {
    return replies_[peer].by_request.count(request) > 0;
  }
  int64_t Value(int64_t peer, int64_t request) {
    return replies_[peer].by_request.at(request).second;
  }
  int64_t Code(int64_t peer, int64_t request) {
    return replies_[peer].by_request.at(request).first;
  }
  int64_t UpdateTopology(int64_t peer, int64_t timeout_ms = 60000) {
    return Send(peer, MessageType::kUpdateTopology, {timeout_ms});
  }
  // `shared_memory`: the flag that asks for a turn in the arena (kOpTurn).
  void StartOp(int64_t peer, int64_t epoch, int64_t tag, int64_t shared_memory = 0) {
    Message start{MessageType::kOpStart, {0, epoch, tag, 0, 16, 7, 0, 0, -1, shared_memory}, "op"};
    ASSERT_TRUE(state_.Handle(peer, start).ok());
    Drain();
  }
  // A round of `parts` all-reduces under `tag`, asking for one turn each (or `turns`).
  void StartRound(int64_t peer, int64_t epoch, int64_t tag, int parts, int64_t turns = -1) {
    Message start{MessageType::kOpStart, {0, epoch, tag, 0}, "round"};
    for (int p = 0; p < parts; ++p) {
      start.ints.insert(start.ints.end(), {16 + p, 7, 0, 0, -1});
    }
    start.ints.push_back(turns < 0 ? parts : turns);
    ASSERT_TRUE(state_.Handle(peer, start).ok());
    Drain();
  }
};

TEST_F(MasterStateTest, AWaitingPeerAnotherPeerNeedsIsLetGoWithoutAcceptingAnyone) {
  const int64_t a = state_.Join(0, "a");
  const int64_t b = state_.Join(0, "b");
  const int64_t first = UpdateTopology(a);  // Takes b in: a is alone.
  ASSERT_TRUE(Answered(a, first));
  EXPECT_EQ(Value(a, first), 1);
  state_.Join(0, "c");  // Pending now. Epochs: 1 when a came, 2 when b was accepted.
  const int64_t waiting = UpdateTopology(a);
  EXPECT_FALSE(Answered(a, waiting));  // b is not here yet: a waits.
  StartOp(b, /*epoch=*/2, /*tag=*/5);  // b runs an all-reduce a has not joined ...
  ASSERT_TRUE(Answered(a, waiting));   // ... so a is let go to join it, nobody accepted.
  EXPECT_EQ(Value(a, waiting), 0);
  EXPECT_EQ(state_.pending_count(), 1);
  StartOp(a, 2, 5);
  // Both come to update_topology later: c is accepted.
  const int64_t from_a = UpdateTopology(a);
  const int64_t from_b = UpdateTopology(b);
  ASSERT_TRUE(Answered(a, from_a) && Answered(b, from_b));
  EXPECT_EQ(Value(a, from_a), 1);
  EXPECT_EQ(Value(b, from_b), 1);
  EXPECT_EQ(state_.pending_count(), 0);
}

TEST_F(MasterStateTest, ANewcomerMayEnterWithUpdateTopologyOrArePeersPending) {
  const int64_t a = state_.Join(0, "a");
  state_.Join(0, "b");
  UpdateTopology(a);
  const int64_t b = 2;
  // Nobody pending: both return at once, so b (just accepted) lines up with a either way.
  const int64_t asked = Send(b, MessageType::kArePeersPending);
  EXPECT_EQ(Value(b, asked), 0);
  const int64_t updated = UpdateTopology(b);
  ASSERT_TRUE(Answered(b, updated));
  EXPECT_EQ(Value(b, updated), 0);
}

TEST_F(MasterStateTest, AMillionIdleRoundsHoldNothing) {
  const int64_t a = state_.Join(0, "a");
  state_.Join(0, "b");
  UpdateTopology(a);
  for (int i = 0; i < 1000000; ++i) {
    const int64_t peer = 1 + i % 2;
    Message message{
        i % 3 == 0 ? MessageType::kUpdateTopology : MessageType::kArePeersPending, {i}, ""};
    if (message.type == MessageType::kUpdateTopology) message.ints.push_back(60000);
    ASSERT_TRUE(state_.Handle(peer, message).ok());
    ASSERT_EQ(state_.TakeOutgoing().size(), 1u);  // Answered at once.
  }
  EXPECT_EQ(state_.HeldEntries(), 0u);
}

TEST_F(MasterStateTest, AnExpiredUpdateTopologyNamesWhomItWaitedFor) {
  const int64_t a = state_.Join(0, "host-a:1");
  state_.Join(0, "host-b:2");
  UpdateTopology(a);
  state_.Join(0, "host-c:3");
  const absl::Time before = absl::Now();
  const int64_t waiting = UpdateTopology(a, /*timeout_ms=*/50);
  // The master's loop sleeps until then.
  EXPECT_GE(state_.NextExpiry(), before + absl::Milliseconds(50));
  EXPECT_LE(state_.NextExpiry(), absl::Now() + absl::Milliseconds(50));
  state_.Expire(absl::Now());
  Drain();
  EXPECT_FALSE(Answered(a, waiting));
  state_.Expire(absl::Now() + absl::Seconds(1));
  Drain();
  ASSERT_TRUE(Answered(a, waiting));
  EXPECT_EQ(state_.NextExpiry(), absl::InfiniteFuture());
  EXPECT_EQ(Code(a, waiting), static_cast<int64_t>(absl::StatusCode::kDeadlineExceeded));
  const std::string& text = replies_[a].texts.back();
  EXPECT_NE(text.find("peer 2 (host-b:2, group 0) (in none of the elastic calls)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("host-c:3"), std::string::npos) << text;
  EXPECT_EQ(state_.HeldEntries(), 0u);
  // Usable afterwards: both call, the pending peer is accepted.
  const int64_t again = UpdateTopology(a);
  const int64_t from_b = UpdateTopology(2);
  EXPECT_EQ(Value(a, again), 1);
  EXPECT_EQ(Value(2, from_b), 1);
}

TEST_F(MasterStateTest, TwoUpdateTopologiesFromOnePeerAreRefusedNotFatal) {
  const int64_t a = state_.Join(0, "a");
  state_.Join(0, "b");
  UpdateTopology(a);
  state_.Join(0, "c");
  const int64_t first = UpdateTopology(a);
  const int64_t second = UpdateTopology(a);
  EXPECT_FALSE(Answered(a, first));
  ASSERT_TRUE(Answered(a, second));
  EXPECT_EQ(Code(a, second), static_cast<int64_t>(absl::StatusCode::kFailedPrecondition));
}

TEST_F(MasterStateTest, SharedMemoryTurnsGoOutOnceEveryMemberStartedInThatOrder) {
  const int64_t a = state_.Join(0, "a");
  const int64_t b = state_.Join(0, "b");
  UpdateTopology(a);  // b is accepted: epoch 2.
  StartOp(a, 2, /*tag=*/1, 1);
  StartOp(a, 2, /*tag=*/2, 1);
  EXPECT_TRUE(turns_.empty());  // b started neither: nobody may wait in the arena for it.
  StartOp(b, 2, 2, 1);
  StartOp(b, 2, 1, 1);
  using Turns = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(turns_[a], (Turns{{2, 0}, {1, 1}}));  // In the order the last member started them.
  EXPECT_EQ(turns_[b], (Turns{{2, 0}, {1, 1}}));
  StartOp(a, 2, 3);  // Over the rings: no turn.
  StartOp(b, 2, 3);
  EXPECT_EQ(turns_[a].size(), 2u);
  StartOp(a, 2, 4, 1);  // The members disagree on the arena: an error, and no turn.
  StartOp(b, 2, 4, 0);
  EXPECT_EQ(turns_[a].size(), 2u);
  ASSERT_EQ(outcomes_[b].size(), 1u);
  EXPECT_NE(outcomes_[b][0].find("not both in shared memory"), std::string::npos)
      << outcomes_[b][0];
  // A new epoch numbers its turns from 0 again.
  const int64_t c = state_.Join(0, "c");
  const int64_t from_a = UpdateTopology(a);
  const int64_t from_b = UpdateTopology(b);
  ASSERT_TRUE(Answered(a, from_a) && Answered(b, from_b));
  for (int64_t peer : {a, b, c}) StartOp(peer, 3, 7, 1);
  for (int64_t peer : {a, b, c}) {
    ASSERT_FALSE(turns_[peer].empty()) << peer;
    EXPECT_EQ(turns_[peer].back(), (std::pair<int64_t, int64_t>{7, 0})) << peer;
  }
}

TEST_F(MasterStateTest, ARoundTakesOneTurnPerAllReduceAndTheNextOpFollowsIt) {
  const int64_t a = state_.Join(0, "a");
  const int64_t b = state_.Join(0, "b");
  UpdateTopology(a);  // b is accepted: epoch 2.
  using Turns = std::vector<std::pair<int64_t, int64_t>>;
  StartOp(a, 2, /*tag=*/1, 1);
  StartOp(b, 2, 1, 1);
  StartRound(a, 2, /*tag=*/kMaxTag + 3, /*parts=*/5);
  StartRound(b, 2, kMaxTag + 3, 5);
  StartOp(a, 2, /*tag=*/2, 1);
  StartOp(b, 2, 2, 1);
  const int64_t round = static_cast<int64_t>(kMaxTag) + 3;
  EXPECT_EQ(turns_[a], (Turns{{1, 0}, {round, 1}, {2, 6}}));  // The round holds turns 1-5.
  EXPECT_EQ(turns_[b], turns_[a]);
  // A round whose count of turns does not match its all-reduces asks for none; peers that
  // differ on it disagree, which fails the round with no turn.
  StartRound(a, 2, kMaxTag + 9, 3, /*turns=*/2);
  StartRound(b, 2, kMaxTag + 9, 3);
  EXPECT_EQ(turns_[a].size(), 3u);
  ASSERT_EQ(outcomes_[b].size(), 1u);
  EXPECT_NE(outcomes_[b][0].find("not both in shared memory"), std::string::npos)
      << outcomes_[b][0];
}

}  // namespace
}  // namespace plexus::elastic
