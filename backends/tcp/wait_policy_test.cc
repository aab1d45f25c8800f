// WaitPolicy's decisions against a clock the test sets: the probes of each cycle, the choice
// they lead to, how the probes thin out while the choice holds, and PLEXUS_WAIT's modes.
#include "backends/tcp/wait_policy.h"

#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

// Cycles follow the wall clock: this time starts one.
const absl::Time kCycleStart = absl::FromUnixSeconds(1000000);
constexpr absl::Duration kProbe = WaitPolicy::kProbe;

absl::Time InSpinProbe(int cycle) { return kCycleStart + cycle * WaitPolicy::kCycle + kProbe / 2; }
absl::Time InSleepProbe(int cycle) { return InSpinProbe(cycle) + kProbe; }
absl::Time InChoice(int cycle) { return InSpinProbe(cycle) + 3 * kProbe; }

// Ends `spin` waits in cycle `cycle`'s spin probe and `sleep` in its sleep probe.
void Probe(WaitPolicy& policy, int cycle, int spin, int sleep) {
  for (int i = 0; i < spin; ++i) policy.WaitEnded(InSpinProbe(cycle));
  for (int i = 0; i < sleep; ++i) policy.WaitEnded(InSleepProbe(cycle));
}

TEST(WaitPolicyTest, ProbesSpinningThenSleepingAndKeepsSpinningWhenItIsAsFast) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  EXPECT_TRUE(policy.SpinNow(InSpinProbe(0)));
  EXPECT_FALSE(policy.SpinNow(InSleepProbe(0)));
  Probe(policy, 0, 20, 29);  // Not half as many again.
  EXPECT_TRUE(policy.SpinNow(InChoice(0)));
  EXPECT_TRUE(policy.SpinNow(kCycleStart + WaitPolicy::kCycle - absl::Nanoseconds(1)));
}

TEST(WaitPolicyTest, SleepsWhereSleepingEndsHalfAsManyWaitsAgain) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  Probe(policy, 0, 20, 30);
  EXPECT_FALSE(policy.SpinNow(InChoice(0)));
  // A change of choice probes the next cycle, where spinning wins back.
  EXPECT_TRUE(policy.SpinNow(InSpinProbe(1)));
  Probe(policy, 1, 20, 20);
  EXPECT_TRUE(policy.SpinNow(InChoice(1)));
}

TEST(WaitPolicyTest, TooFewWaitsKeepTheChoiceAndProbeAgain) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  Probe(policy, 0, 20, 40);
  ASSERT_FALSE(policy.SpinNow(InChoice(0)));
  Probe(policy, 1, 2, WaitPolicy::kFewestWaits - 3);
  EXPECT_FALSE(policy.SpinNow(InChoice(1)));
  EXPECT_TRUE(policy.SpinNow(InSpinProbe(2)));
  Probe(policy, 2, 30, 0);
  EXPECT_TRUE(policy.SpinNow(InChoice(2)));
}

TEST(WaitPolicyTest, OnlyWaitsEndingInAProbeCount) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  for (int i = 0; i < 100; ++i) policy.WaitEnded(InChoice(0));
  Probe(policy, 1, 20, 10);
  for (int i = 0; i < 100; ++i) policy.WaitEnded(InChoice(1) - absl::Milliseconds(10));
  EXPECT_TRUE(policy.SpinNow(InChoice(1)));
}

TEST(WaitPolicyTest, EachProbeCountsAfresh) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  Probe(policy, 0, 20, 40);
  ASSERT_FALSE(policy.SpinNow(InChoice(0)));
  // Alone, cycle 1's counts choose spinning; with cycle 0's added (40 against 54) they would
  // choose sleeping.
  Probe(policy, 1, 20, 14);
  EXPECT_TRUE(policy.SpinNow(InChoice(1)));
}

TEST(WaitPolicyTest, ProbesThinOutWhileTheChoiceHolds) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  // The first choice changes it (from spinning): the next cycle probes. Then each choice equal
  // to the last doubles the cycles to the next probe: 2, 4, 8, 8.
  int cycle = 0;
  for (int gap : {1, 2, 4, 8, 8}) {
    Probe(policy, cycle, 10, 30);
    ASSERT_FALSE(policy.SpinNow(InChoice(cycle))) << "cycle " << cycle;
    for (int skipped = cycle + 1; skipped < cycle + gap; ++skipped) {
      EXPECT_FALSE(policy.SpinNow(InSpinProbe(skipped))) << "cycle " << skipped << " probed";
      policy.WaitEnded(InSpinProbe(skipped));  // Not counted either.
    }
    cycle += gap;
    EXPECT_TRUE(policy.SpinNow(InSpinProbe(cycle))) << "cycle " << cycle << " did not probe";
  }
  // A change back probes the very next cycle.
  Probe(policy, cycle, 30, 30);
  EXPECT_TRUE(policy.SpinNow(InChoice(cycle)));
  EXPECT_FALSE(policy.SpinNow(InSleepProbe(cycle + 1)));
}

TEST(WaitPolicyTest, SpinModeAlwaysSpinsAndSleepModeNever) {
  WaitPolicy spin(WaitPolicy::Mode::kSpin);
  Probe(spin, 0, 1, 100);
  EXPECT_TRUE(spin.SpinNow(InSleepProbe(0)));
  EXPECT_TRUE(spin.SpinNow(InChoice(0)));
  WaitPolicy sleep(WaitPolicy::Mode::kSleep);
  Probe(sleep, 0, 100, 1);
  EXPECT_FALSE(sleep.SpinNow(InSpinProbe(0)));
  EXPECT_FALSE(sleep.SpinNow(InChoice(0)));
}

TEST(WaitPolicyTest, ParsesTheModesAndNamesABadOne) {
  EXPECT_EQ(*WaitPolicy::ParseMode(""), WaitPolicy::Mode::kAdaptive);
  EXPECT_EQ(*WaitPolicy::ParseMode("adaptive"), WaitPolicy::Mode::kAdaptive);
  EXPECT_EQ(*WaitPolicy::ParseMode("spin"), WaitPolicy::Mode::kSpin);
  EXPECT_EQ(*WaitPolicy::ParseMode("sleep"), WaitPolicy::Mode::kSleep);
  const absl::StatusOr<WaitPolicy::Mode> bad = WaitPolicy::ParseMode("yield");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("PLEXUS_WAIT='yield'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("adaptive, spin or sleep"), std::string::npos);
}

}  // namespace
}  // namespace plexus::tcp
