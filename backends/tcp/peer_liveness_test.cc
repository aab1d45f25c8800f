// Peer liveness with a clock alone: silence past the interval is loss, a rank that was away
// itself blames nobody, idle peers get beats a fifth of the interval apart, a goodbye is not a
// loss.
#include "backends/tcp/peer_liveness.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kInterval = absl::Seconds(1);
const absl::Time kStart = absl::FromUnixSeconds(1000);

auto NothingQueued() {
  return [](int) { return false; };
}

TEST(PeerLivenessTest, ThisRankAndUnconnectedPeersAreNotAlive) {
  PeerLiveness liveness(0, {false, true, false}, kInterval, kStart);
  EXPECT_FALSE(liveness.alive(0));
  EXPECT_TRUE(liveness.alive(1));
  EXPECT_FALSE(liveness.alive(2));
  EXPECT_TRUE(liveness.AnyoneAlive());
  // A peer that never connected is missing; this rank never is.
  EXPECT_THAT(liveness.LostPeers(), ElementsAre(2));
}

TEST(PeerLivenessTest, APeerSilentPastTheIntervalIsJudgedSilentAndOthersAreNot) {
  PeerLiveness liveness(0, {false, true, true}, kInterval, kStart);
  absl::Time now = kStart;
  std::vector<int> silent;
  absl::Time silent_at;
  std::string why;
  while (silent.empty() && now < kStart + 3 * kInterval) {
    now = liveness.next_check();
    liveness.Heard(1);  // Rank 1 keeps talking; rank 2 says nothing.
    const PeerLiveness::Verdict verdict = liveness.Check(now, NothingQueued());
    for (const auto& [peer, reason] : verdict.silent) {
      silent.push_back(peer);
      why = reason;
    }
    silent_at = now;
  }
  ASSERT_THAT(silent, ElementsAre(2));
  EXPECT_GT(silent_at - kStart, kInterval);
  EXPECT_LE(silent_at - kStart, kInterval + kInterval / 10);
  EXPECT_THAT(why, HasSubstr("past the heartbeat interval of 1s"));
  EXPECT_THAT(why, HasSubstr("PLEXUS_HEARTBEAT"));
  // Judged, not yet marked: the caller marks it as it fails the peer's work.
  EXPECT_TRUE(liveness.alive(2));
  EXPECT_TRUE(liveness.MarkLost(2));
  EXPECT_FALSE(liveness.MarkLost(2));
  EXPECT_THAT(liveness.LostPeers(), ElementsAre(2));
  EXPECT_TRUE(liveness.alive(1));
}

TEST(PeerLivenessTest, ARankThatWasAwayItselfCountsSilenceFromItsReturn) {
  PeerLiveness liveness(0, {false, true}, kInterval, kStart);
  ASSERT_THAT(liveness.Check(liveness.next_check(), NothingQueued()).silent, IsEmpty());
  // Stopped or starved for two intervals: the peer's silence over them says nothing.
  const absl::Time back = kStart + 2 * kInterval;
  EXPECT_THAT(liveness.Check(back, NothingQueued()).silent, IsEmpty());
  absl::Time now = back;
  bool judged = false;
  while (!judged && now < back + 3 * kInterval) {
    now = liveness.next_check();
    judged = !liveness.Check(now, NothingQueued()).silent.empty();
  }
  EXPECT_TRUE(judged);
  EXPECT_GT(now - back, kInterval);
}

TEST(PeerLivenessTest, IdlePeersGetABeatAFifthOfTheIntervalApart) {
  PeerLiveness liveness(1, {true, false, true}, kInterval, kStart);
  // Rank 2 has frames queued all along: they are its beat.
  auto queued_for_two = [](int peer) { return peer == 2; };
  std::vector<absl::Time> beats_to_zero;
  for (int check = 0; check < 20; ++check) {
    const absl::Time now = liveness.next_check();
    liveness.Heard(0);
    liveness.Heard(2);
    const PeerLiveness::Verdict verdict = liveness.Check(now, queued_for_two);
    EXPECT_THAT(verdict.silent, IsEmpty());
    for (int peer : verdict.beat) {
      EXPECT_EQ(peer, 0);
      beats_to_zero.push_back(now);
    }
  }
  // Twenty checks a tenth of the interval apart: a beat every other one, the first at once.
  ASSERT_EQ(beats_to_zero.size(), 10u);
  EXPECT_EQ(beats_to_zero.front(), kStart + kInterval / 10);
  for (size_t i = 1; i < beats_to_zero.size(); ++i) {
    EXPECT_EQ(beats_to_zero[i] - beats_to_zero[i - 1], kInterval / 5);
  }
}

TEST(PeerLivenessTest, ADepartedPeerIsNeitherAliveNorLostNorChecked) {
  PeerLiveness liveness(0, {false, true, true}, kInterval, kStart);
  liveness.MarkDeparted(1);
  EXPECT_FALSE(liveness.alive(1));
  EXPECT_TRUE(liveness.departed(1));
  EXPECT_THAT(liveness.LostPeers(), IsEmpty());
  EXPECT_TRUE(liveness.AnyoneAlive());
  absl::Time now = kStart;
  std::vector<int> silent;
  while (now < kStart + 2 * kInterval) {
    now = liveness.next_check();
    for (const auto& entry : liveness.Check(now, NothingQueued()).silent) {
      silent.push_back(entry.first);
      EXPECT_TRUE(liveness.MarkLost(entry.first));  // As the loop does; then it is not judged.
    }
  }
  EXPECT_THAT(silent, ElementsAre(2));
  EXPECT_FALSE(liveness.AnyoneAlive());
  EXPECT_THAT(liveness.LostPeers(), ElementsAre(2));
}

TEST(PeerLivenessTest, WithoutAnIntervalNothingIsEverChecked) {
  PeerLiveness liveness(0, {false, true}, absl::InfiniteDuration(), kStart);
  EXPECT_EQ(liveness.next_check(), absl::InfiniteFuture());
}

}  // namespace
}  // namespace plexus::tcp
