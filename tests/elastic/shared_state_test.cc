// sync_shared_state: the master's plan (PlanSync) for every strategy, and forked peers that
// reconcile diverged state, hand the state to a peer joining mid-run (also to newcomers that
// outnumber the group), refuse irreconcilable ballots without touching a byte, and finish a sync
// whose sender is SIGKILLed mid-transfer.
#include "frontend/elastic/shared_state.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_peers.h"
#include "tests/testing/subprocess.h"

namespace plexus::elastic {
namespace {

using ::testing::HasSubstr;

SyncBallot Ballot(int64_t peer, uint64_t revision, SyncStrategy strategy,
                  std::vector<uint64_t> hashes, bool allow_inequality = false) {
  SyncBallot b;
  b.peer = peer;
  b.description = absl::StrCat("peer ", peer);
  b.revision = revision;
  b.strategy = strategy;
  for (size_t t = 0; t < hashes.size(); ++t) {
    b.tensors.push_back({absl::StrCat("t", t), 4, static_cast<int64_t>(DType::kFloat32), hashes[t],
                         allow_inequality});
  }
  return b;
}

constexpr auto kPopular = SyncStrategy::kEnforcePopular;

TEST(PlanSyncTest, TheMajorityContentAndRevisionWin) {
  auto plan = PlanSync({Ballot(1, 5, kPopular, {10, 20}), Ballot(2, 5, kPopular, {10, 21}),
                        Ballot(3, 5, kPopular, {11, 20}), Ballot(4, 4, kPopular, {10, 20})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 5u);
  EXPECT_EQ(plan->popular_hash, (std::vector<uint64_t>{10, 20}));
  // Tensor 0: peer 3 (index 2) receives from a holder (1 or 2); tensor 1: peer 2 receives.
  EXPECT_EQ(plan->source[0][0], -1);
  EXPECT_EQ(plan->source[0][1], -1);
  EXPECT_THAT(plan->source[0][2], ::testing::AnyOf(1, 2));
  EXPECT_THAT(plan->source[1][1], ::testing::AnyOf(1, 3));
  EXPECT_EQ(plan->source[1][2], -1);
  // The outdated peer 4 holds the popular hashes already: it moves nothing.
  EXPECT_EQ(plan->source[0][3], -1);
  EXPECT_EQ(plan->source[1][3], -1);
}

TEST(PlanSyncTest, TiesPickTheHigherRevisionAndTheSmallerHash) {
  auto plan = PlanSync(
      {Ballot(1, 3, kPopular, {7}), Ballot(2, 4, kPopular, {9}), Ballot(3, 4, kPopular, {8})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 4u);
  EXPECT_EQ(plan->popular_hash[0], 8u);
  EXPECT_EQ(plan->source[0][0], 3);  // Outdated: receives from the only holder.
  EXPECT_EQ(plan->source[0][1], 3);
  EXPECT_EQ(plan->source[0][2], -1);
}

TEST(PlanSyncTest, ReceiveOnlyPeersNeverVoteAndAlwaysAdopt) {
  // Two joiners with equal zeros at a high revision must not outvote the one real holder.
  auto plan =
      PlanSync({Ballot(1, 9, kPopular, {5}), Ballot(2, 100, SyncStrategy::kReceiveOnly, {0}),
                Ballot(3, 100, SyncStrategy::kReceiveOnly, {0})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 9u);
  EXPECT_EQ(plan->source[0], (std::vector<int64_t>{-1, 1, 1}));
  auto nobody = PlanSync({Ballot(1, 0, SyncStrategy::kReceiveOnly, {5})});
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(nobody.status().message(), HasSubstr("RECEIVE_ONLY"));
}

TEST(PlanSyncTest, NewcomersDeferToTheGroupsMembersHoweverMany) {
  // Peer 1 ran the group alone to revision 1; two newcomers at revision 0 with their own random
  // weights must receive its state, not roll it back (what a plain majority would do).
  SyncBallot member = Ballot(1, 1, kPopular, {5});
  member.holds_group_state = true;
  auto plan = PlanSync({member, Ballot(2, 0, kPopular, {3}), Ballot(3, 0, kPopular, {3})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 1u);
  EXPECT_EQ(plan->popular_hash[0], 5u);
  EXPECT_EQ(plan->source[0], (std::vector<int64_t>{-1, 1, 1}));
  // Among members the majority still rules; newcomers never vote while a member does.
  SyncBallot other = Ballot(4, 2, kPopular, {6});
  other.holds_group_state = true;
  SyncBallot third = Ballot(5, 2, kPopular, {6});
  third.holds_group_state = true;
  plan = PlanSync({member, other, third, Ballot(2, 7, kPopular, {9}), Ballot(3, 7, kPopular, {9}),
                   Ballot(6, 7, kPopular, {9})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 2u);
  EXPECT_EQ(plan->popular_hash[0], 6u);
  EXPECT_EQ(plan->source[0][1], -1);
  EXPECT_THAT(plan->source[0][0], ::testing::AnyOf(4, 5));
  EXPECT_THAT(plan->source[0][3], ::testing::AnyOf(4, 5));
  // A member that asked to RECEIVE_ONLY does not vote; then the newcomers decide.
  member.strategy = SyncStrategy::kReceiveOnly;
  plan = PlanSync({member, Ballot(2, 0, kPopular, {3}), Ballot(3, 0, kPopular, {3})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->revision, 0u);
  EXPECT_EQ(plan->source[0], (std::vector<int64_t>{2, -1, -1}));
}

TEST(PlanSyncTest, SendOnlyPeersAreTheAuthorityAndMustAgree) {
  auto plan = PlanSync({Ballot(1, 2, SyncStrategy::kSendOnly, {5}), Ballot(2, 2, kPopular, {6}),
                        Ballot(3, 2, kPopular, {6})});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->popular_hash[0], 5u);
  EXPECT_EQ(plan->source[0], (std::vector<int64_t>{-1, 1, 1}));
  auto split = PlanSync(
      {Ballot(1, 2, SyncStrategy::kSendOnly, {5}), Ballot(2, 2, SyncStrategy::kSendOnly, {6})});
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(split.status().message(), HasSubstr("SEND_ONLY"));
}

TEST(PlanSyncTest, ContentInequalityIsAllowedOnlyAtTheTargetRevision) {
  auto plan = PlanSync({Ballot(1, 2, kPopular, {5}, true), Ballot(2, 2, kPopular, {5}, true),
                        Ballot(3, 2, kPopular, {6}, true), Ballot(4, 1, kPopular, {7}, true)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->source[0][2], -1);  // Up to date: keeps its own content.
  EXPECT_NE(plan->source[0][3], -1);  // Outdated: adopts the popular content.
}

TEST(PlanSyncTest, DifferentTensorListsNameBothPeers) {
  SyncBallot a = Ballot(1, 0, kPopular, {1, 2});
  SyncBallot b = Ballot(2, 0, kPopular, {1, 2});
  b.tensors[1].count = 5;
  auto plan = PlanSync({a, b});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), HasSubstr("peer 1"));
  EXPECT_THAT(plan.status().message(), HasSubstr("peer 2"));
  EXPECT_THAT(plan.status().message(), HasSubstr("t1"));
  b = Ballot(2, 0, kPopular, {1});
  EXPECT_THAT(PlanSync({a, b}).status().message(), HasSubstr("shares 1"));
}

TEST(ContentHashTest, EqualBytesEqualHashesAndOneBitChangesIt) {
  std::vector<uint8_t> data(1000 * 37 + 13);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  std::vector<uint8_t> copy = data;
  EXPECT_EQ(ContentHash(data.data(), data.size()), ContentHash(copy.data(), copy.size()));
  for (size_t at : {size_t{0}, size_t{17}, data.size() / 2, data.size() - 1}) {
    copy[at] ^= 1;
    EXPECT_NE(ContentHash(data.data(), data.size()), ContentHash(copy.data(), copy.size())) << at;
    copy[at] ^= 1;
  }
  EXPECT_NE(ContentHash(data.data(), 64), ContentHash(data.data(), 65));
}

TEST(ValidateSharedStateTest, RejectsWhatCannotBeSynchronised) {
  float x = 0;
  SharedState state;
  EXPECT_THAT(ValidateSharedState(state).message(), HasSubstr("no tensors"));
  state.tensors = {{"a", &x, 1, DType::kFloat32, false}, {"a", &x, 1, DType::kFloat32, false}};
  EXPECT_THAT(ValidateSharedState(state).message(), HasSubstr("appears twice"));
  state.tensors = {{"a", nullptr, 1, DType::kFloat32, false}};
  EXPECT_THAT(ValidateSharedState(state).message(), HasSubstr("no buffer"));
}

// The model every peer trains: "weights" and "step"; content A(k) is what an up-to-date peer
// holds at revision k.
struct Model {
  std::vector<float> weights = std::vector<float>(1 << 18);
  int64_t step = 0;
  SharedState state;

  Model() {
    state.tensors = {
        {"weights", weights.data(), static_cast<int64_t>(weights.size()), DType::kFloat32, false},
        {"step", &step, 1, DType::kInt64, false}};
  }
  void Fill(uint64_t revision, float salt) {
    for (size_t i = 0; i < weights.size(); ++i)
      weights[i] = static_cast<float>(i % 1000) * 0.5f + salt;
    step = static_cast<int64_t>(revision);
    state.revision = revision;
  }
  bool Holds(uint64_t revision) const {
    Model want;
    want.Fill(revision, static_cast<float>(revision));
    return state.revision == revision && step == want.step && weights == want.weights;
  }
};

TEST(SharedStateSyncTest, DivergedPeerAdoptsThePopularStateAndAJoinerReceivesIt) {
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  int first_sync_done[2];
  ASSERT_EQ(pipe(first_sync_done), 0);
  absl::Status status = testing::RunInChildren(
      4,
      [&](int peer) {
        auto comm = MakePeer(port);
        Model model;
        if (peer == 3) {  // The joiner: arrives after the others synced once, with nothing.
          char byte;
          for (int i = 0; i < 3; ++i) {
            if (read(first_sync_done[0], &byte, 1) != 1) return Fail(peer, "pipe");
          }
          if (absl::Status s = comm->Connect(absl::Seconds(60)); !s.ok())
            return Fail(peer, "connect", s);
          auto info = comm->SyncSharedState(model.state, SyncStrategy::kReceiveOnly);
          if (!info.ok()) return Fail(peer, "joiner sync", info.status());
          if (!model.Holds(8)) return Fail(peer, "joiner did not receive revision 8");
          if (info->rx_bytes < static_cast<int64_t>(model.weights.size() * 4)) {
            return Fail(peer, absl::StrCat("joiner received only ", info->rx_bytes, " bytes"));
          }
        } else {
          if (absl::Status s = JoinWorld(*comm, 3); !s.ok()) return Fail(peer, "join", s);
          // Peer 2 diverged (same revision, other content): the majority's content wins.
          model.Fill(7, peer == 2 ? 99.0f : 7.0f);
          auto info = comm->SyncSharedState(model.state, SyncStrategy::kEnforcePopular);
          if (!info.ok()) return Fail(peer, "sync", info.status());
          if (!model.Holds(7)) return Fail(peer, "does not hold the popular revision 7");
          if ((peer == 2) != (info->rx_bytes > 0)) {
            return Fail(peer, absl::StrCat("received ", info->rx_bytes, " bytes"));
          }
          [[maybe_unused]] ssize_t n = write(first_sync_done[1], "s", 1);
          // A training step, then take the joiner in and hand it the state.
          model.Fill(8, 8.0f);
          if (absl::Status s = GrowWorld(*comm, 4); !s.ok()) return Fail(peer, "join 4", s);
          info = comm->SyncSharedState(model.state, SyncStrategy::kEnforcePopular);
          if (!info.ok()) return Fail(peer, "sync with the joiner", info.status());
          if (!model.Holds(8)) return Fail(peer, "lost revision 8");
        }
        // Everyone, joiner included, all-reduces together afterwards.
        int64_t one = 1;
        ReduceDescriptor d;
        d.count = 1;
        d.dtype = DType::kInt64;
        auto reduced = comm->AllReduce(&one, &one, d);
        if (!reduced.ok() || one != 4)
          return Fail(peer, absl::StrCat("all_reduce gave ", one), reduced.status());
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SharedStateSyncTest, NewcomersOutnumberingTheGroupReceiveItsStateInsteadOfRollingItBack) {
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  int member_synced[2];
  ASSERT_EQ(pipe(member_synced), 0);
  absl::Status status = testing::RunInChildren(
      3,
      [&](int peer) {
        auto comm = MakePeer(port);
        Model model;
        if (peer == 0) {  // Trains alone to revision 5, then takes in two newcomers at once.
          if (absl::Status s = comm->Connect(absl::Seconds(60)); !s.ok())
            return Fail(peer, "connect", s);
          model.Fill(4, 4.0f);
          auto info = comm->SyncSharedState(model.state, SyncStrategy::kEnforcePopular);
          if (!info.ok()) return Fail(peer, "alone sync", info.status());
          [[maybe_unused]] ssize_t n = write(member_synced[1], "ss", 2);
          model.Fill(5, 5.0f);
          if (absl::Status s = GrowWorld(*comm, 3); !s.ok()) return Fail(peer, "grow", s);
        } else {  // Newcomers with their own (equal) initial weights, voting as usual.
          char byte;
          if (read(member_synced[0], &byte, 1) != 1) return Fail(peer, "pipe");
          if (absl::Status s = JoinWorld(*comm, 3); !s.ok()) return Fail(peer, "join", s);
          model.Fill(0, 0.0f);
        }
        auto info = comm->SyncSharedState(model.state, SyncStrategy::kEnforcePopular);
        if (!info.ok()) return Fail(peer, "sync", info.status());
        if (!model.Holds(5)) {
          return Fail(peer, absl::StrCat("holds revision ", model.state.revision, " (step ",
                                         model.step, "), not the group's revision 5"));
        }
        if ((peer == 0) != (info->rx_bytes == 0)) {
          return Fail(peer, absl::StrCat("received ", info->rx_bytes, " bytes"));
        }
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(SharedStateSyncTest, IrreconcilableBallotsFailEverywhereWithBuffersUntouched) {
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  absl::Status status = RunJoinedPeers(
      port, 2,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        Model model;
        model.Fill(3, static_cast<float>(peer));
        const std::vector<float> before = model.weights;
        auto info = comm->SyncSharedState(model.state, SyncStrategy::kSendOnly);
        if (info.ok() || info.status().code() != absl::StatusCode::kFailedPrecondition ||
            !absl::StrContains(info.status().message(), "SEND_ONLY")) {
          return Fail(peer, "two disagreeing SEND_ONLY peers", info.status());
        }
        if (model.weights != before || model.state.revision != 3)
          return Fail(peer, "buffers changed");
        // Different tensor lists: both peers get the error naming the tensor.
        SharedState other = model.state;
        if (peer == 1) other.tensors[1].name = "steps";
        info = comm->SyncSharedState(other, SyncStrategy::kEnforcePopular);
        if (info.ok() || !absl::StrContains(info.status().message(), "steps")) {
          return Fail(peer, "different tensor lists", info.status());
        }
        // Both voting with different contents: the tie goes to the smaller hash, on both.
        info = comm->SyncSharedState(model.state, SyncStrategy::kEnforcePopular);
        if (!info.ok()) return Fail(peer, "tie", info.status());
        const uint64_t hash = ContentHash(model.weights.data(), model.weights.size() * 4);
        Model zero, one;
        zero.Fill(3, 0.0f);
        one.Fill(3, 1.0f);
        const uint64_t want = std::min(ContentHash(zero.weights.data(), zero.weights.size() * 4),
                                       ContentHash(one.weights.data(), one.weights.size() * 4));
        return hash == want ? 0 : Fail(peer, "tie went to the wrong content");
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Peers 0 and 1 hold revision 5 of a 64 MiB state; peer 2 is fresh. One of the senders kills
// itself at a random moment of the sync; the survivors' sync must still succeed, and peer 2 end
// up with exactly revision 5 (a half-received tensor would show).
TEST(SharedStateSyncTest, SyncCompletesWhenASenderIsKilledMidTransfer) {
  const int runs = getenv("ELASTIC_RUNS") ? std::max(1, atoi(getenv("ELASTIC_RUNS")) / 4) : 5;
  std::mt19937 random(777);
  int killed = 0;
  for (int run = 0; run < runs; ++run) {
    auto master = StartMaster();
    ASSERT_NE(master, nullptr);
    const int port = master->port();
    const int victim = run % 2;
    const int delay_us = std::uniform_int_distribution<int>(0, 150000)(random);
    absl::Status status = RunJoinedPeers(
        port, 3,
        [&](int peer, std::unique_ptr<Communicator>& comm) {
          constexpr int kTensors = 8;
          std::vector<std::vector<float>> tensors(kTensors, std::vector<float>(2 << 20));
          SharedState state;
          for (int t = 0; t < kTensors; ++t) {
            const float value = peer == 2 ? 0.0f : static_cast<float>(t + 1);
            std::fill(tensors[t].begin(), tensors[t].end(), value);
            state.tensors.push_back({absl::StrCat("layer", t), tensors[t].data(),
                                     static_cast<int64_t>(tensors[t].size()), DType::kFloat32,
                                     false});
          }
          state.revision = peer == 2 ? 0 : 5;
          if (peer == victim) {
            std::thread([delay_us] {
              usleep(delay_us);
              raise(SIGKILL);
            }).detach();
          }
          auto info = comm->SyncSharedState(
              state, peer == 2 ? SyncStrategy::kReceiveOnly : SyncStrategy::kEnforcePopular);
          if (!info.ok()) return Fail(peer, absl::StrCat("run ", run, " sync"), info.status());
          if (state.revision != 5) return Fail(peer, "revision");
          for (int t = 0; t < kTensors; ++t) {
            for (float v : tensors[t]) {
              if (v != static_cast<float>(t + 1)) {
                return Fail(peer, absl::StrCat("run ", run, " tensor ", t, " holds ", v));
              }
            }
          }
          return 0;
        },
        absl::Seconds(120));
    // The victim's exit is a kill (or, if the sync beat the timer, 0): only survivors count.
    const std::string text(status.message());
    killed += absl::StrContains(text, absl::StrCat("child ", victim, " killed")) ? 1 : 0;
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == victim) continue;
      EXPECT_THAT(text, ::testing::Not(HasSubstr(absl::StrCat("child ", peer, " "))))
          << "run " << run << ": " << text;
    }
  }
  printf("the sender was killed before finishing in %d of %d runs\n", killed, runs);
  EXPECT_GT(killed, 0);
}

}  // namespace
}  // namespace plexus::elastic
