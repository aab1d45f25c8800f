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

// Ends `waits` waits evenly from an eighth into a probe starting at `start` to seven eighths.
void Spread(WaitPolicy& policy, absl::Time start, int waits) {
  for (int i = 0; i < waits; ++i) {
    const absl::Duration at = waits > 1 ? (kProbe * 3 / 4) * i / (waits - 1) : absl::ZeroDuration();
    policy.WaitEnded(start + kProbe / 8 + at);
  }
}

// Ends `spin` waits over cycle `cycle`'s spin probe and `sleep` over its sleep probe.
void Probe(WaitPolicy& policy, int cycle, int spin, int sleep) {
  Spread(policy, kCycleStart + cycle * WaitPolicy::kCycle, spin);
  Spread(policy, kCycleStart + cycle * WaitPolicy::kCycle + kProbe, sleep);
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
  Probe(policy, 2, 30, 5);
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

// Ends `waits` waits in cycle 0's sleep probe, evenly over its first `span`.
void SleepProbePace(WaitPolicy& policy, int waits, absl::Duration span) {
  for (int i = 1; i <= waits; ++i) policy.WaitEnded(kCycleStart + kProbe + i * span / waits);
}

TEST(WaitPolicyTest, ASleepProbeClearlyLosingEndsEarlyAndChoosesSpinning) {
  WaitPolicy policy(WaitPolicy::Mode::kAdaptive);
  const absl::Time sleep_start = kCycleStart + kProbe;
  Spread(policy, kCycleStart, 400);
  // Before kEarliestEnd nothing ends the probe, however few its waits.
  SleepProbePace(policy, 1, WaitPolicy::kEarliestEnd / 2);
  EXPECT_FALSE(policy.SpinNow(sleep_start + WaitPolicy::kEarliestEnd / 2));
  // At a pace of 240 waits a probe (over half of 400) it goes on...
  SleepProbePace(policy, 60, kProbe / 4);
  EXPECT_FALSE(policy.SpinNow(sleep_start + kProbe / 4)) << "ended while keeping up";
  // ...until it slows: 62 waits at half the probe make a pace of 124.
  policy.WaitEnded(sleep_start + kProbe / 2);
  EXPECT_TRUE(policy.SpinNow(sleep_start + kProbe / 2)) << "a slow sleep probe went on";
  EXPECT_TRUE(policy.SpinNow(InChoice(0)));
  // The choice held (spinning): the next probe is two cycles on.
  EXPECT_TRUE(policy.SpinNow(InSleepProbe(1)));
  EXPECT_FALSE(policy.SpinNow(InSleepProbe(2)));
}

TEST(WaitPolicyTest, ASleepProbeEndsEarlyOnlyAgainstEnoughSpinWaits) {
  WaitPolicy few(WaitPolicy::Mode::kAdaptive);
  Spread(few, kCycleStart, WaitPolicy::kFewestWaitsToEndEarly - 1);
  SleepProbePace(few, 2, kProbe / 2);
  EXPECT_FALSE(few.SpinNow(kCycleStart + kProbe * 3 / 2));
  WaitPolicy enough(WaitPolicy::Mode::kAdaptive);
  Spread(enough, kCycleStart, WaitPolicy::kFewestWaitsToEndEarly);
  SleepProbePace(enough, 2, kProbe / 2);
  EXPECT_TRUE(enough.SpinNow(kCycleStart + kProbe * 3 / 2));
}

TEST(WaitPolicyTest, AProbeWithoutWaitsFromItsStartToItsEndDecidesNothing) {
  // A process that began late in a spin probe ends fewer waits there than in the whole sleep
  // probe after it, however fast spinning is: no choice, and the next cycle probes again.
  WaitPolicy late(WaitPolicy::Mode::kAdaptive);
  for (int i = 0; i < 20; ++i) {
    late.WaitEnded(kCycleStart + kProbe * 3 / 4 + i * absl::Microseconds(100));
  }
  Spread(late, kCycleStart + kProbe, 100);
  EXPECT_TRUE(late.SpinNow(InChoice(0)));
  EXPECT_FALSE(late.SpinNow(InSleepProbe(1)));
  // Nor one whose caller stopped waiting early in the sleep probe.
  WaitPolicy gone(WaitPolicy::Mode::kAdaptive);
  Spread(gone, kCycleStart, 20);
  for (int i = 0; i < 100; ++i) gone.WaitEnded(kCycleStart + kProbe + i * absl::Microseconds(10));
  EXPECT_TRUE(gone.SpinNow(InChoice(0)));
  // The same waits spread over both probes choose sleeping.
  WaitPolicy whole(WaitPolicy::Mode::kAdaptive);
  Probe(whole, 0, 20, 100);
  EXPECT_FALSE(whole.SpinNow(InChoice(0)));
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
