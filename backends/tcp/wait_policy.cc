#include "backends/tcp/wait_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/core/environment.h"

namespace plexus::tcp {

absl::StatusOr<WaitPolicy::Mode> WaitPolicy::ParseMode(absl::string_view text) {
  if (text.empty() || text == "adaptive") return Mode::kAdaptive;
  if (text == "spin") return Mode::kSpin;
  if (text == "sleep") return Mode::kSleep;
  return absl::InvalidArgumentError(
      absl::StrCat("PLEXUS_WAIT='", text, "': expected adaptive, spin or sleep"));
}

absl::StatusOr<WaitPolicy::Mode> WaitPolicy::ModeFromEnvironment() {
  const char* text = ReadEnvironment("PLEXUS_WAIT");
  return ParseMode(text == nullptr ? "" : text);
}

WaitPolicy& WaitPolicy::Shared() {
  static WaitPolicy* const policy = new WaitPolicy(ModeFromEnvironment().value_or(Mode::kAdaptive));
  return *policy;
}

WaitPolicy::Phase WaitPolicy::PhaseAt(absl::Time now, int64_t* cycle) const {
  const int64_t ns = absl::ToUnixNanos(now);
  const int64_t length = absl::ToInt64Nanoseconds(kCycle);
  *cycle = ns / length;
  if (*cycle < next_probe_cycle_.load(std::memory_order_relaxed)) return kChosen;
  const int64_t into = ns % length;
  const int64_t probe = absl::ToInt64Nanoseconds(kProbe);
  if (into < probe) return kSpinProbe;
  // A sleep probe that ended early has chosen already.
  if (into < 2 * probe && chosen_in_cycle_.load(std::memory_order_relaxed) != *cycle) {
    return kSleepProbe;
  }
  return kChosen;
}

bool WaitPolicy::SpinNow(absl::Time now) {
  switch (mode_) {
    case Mode::kSpin:
      return true;
    case Mode::kSleep:
      return false;
    case Mode::kAdaptive:
      break;
  }
  int64_t cycle;
  const Phase phase = PhaseAt(now, &cycle);
  if (phase != kChosen) return phase == kSpinProbe;
  if (cycle >= next_probe_cycle_.load(std::memory_order_relaxed) &&
      chosen_in_cycle_.load(std::memory_order_relaxed) != cycle) {
    Choose(cycle, absl::ToInt64Nanoseconds(kProbe));
  }
  return spin_chosen_.load(std::memory_order_relaxed);
}

void WaitPolicy::WaitEnded(absl::Time now) {
  if (mode_ != Mode::kAdaptive) return;
  int64_t cycle;
  const Phase phase = PhaseAt(now, &cycle);
  if (phase == kChosen) return;
  Probe& probe = probes_[phase];
  const int64_t into_probe = absl::ToUnixNanos(now) % absl::ToInt64Nanoseconds(kCycle) -
                             phase * absl::ToInt64Nanoseconds(kProbe);
  int64_t seen = probe.cycle.load(std::memory_order_relaxed);
  if (seen != cycle) {
    // The first wait of this probe clears the last one's count (a racing one may be lost).
    if (seen > cycle || !probe.cycle.compare_exchange_strong(seen, cycle)) {
      if (probe.cycle.load(std::memory_order_relaxed) != cycle) return;
    } else {
      probe.waits.store(0, std::memory_order_relaxed);
      probe.first_ns.store(into_probe, std::memory_order_relaxed);
    }
  }
  probe.waits.fetch_add(1, std::memory_order_relaxed);
  probe.last_ns.store(into_probe, std::memory_order_relaxed);
  if (phase == kSleepProbe) MaybeEndSleepProbe(cycle, into_probe);
}

bool WaitPolicy::Spanned(const Probe& probe, int64_t cycle, int64_t until_ns) const {
  const int64_t quarter = absl::ToInt64Nanoseconds(kProbe) / 4;
  return probe.cycle.load(std::memory_order_relaxed) == cycle &&
         probe.first_ns.load(std::memory_order_relaxed) <= quarter &&
         probe.last_ns.load(std::memory_order_relaxed) >= until_ns - quarter;
}

void WaitPolicy::MaybeEndSleepProbe(int64_t cycle, int64_t into_ns) {
  if (into_ns < absl::ToInt64Nanoseconds(kEarliestEnd)) return;
  const Probe& spin = probes_[kSpinProbe];
  const Probe& sleep = probes_[kSleepProbe];
  if (!Spanned(spin, cycle, absl::ToInt64Nanoseconds(kProbe)) || !Spanned(sleep, cycle, into_ns)) {
    return;
  }
  const int64_t spin_waits = spin.waits.load(std::memory_order_relaxed);
  if (spin_waits < kFewestWaitsToEndEarly) return;
  const int64_t sleep_waits = sleep.waits.load(std::memory_order_relaxed);
  // At its pace so far the whole probe would end sleep_waits * kProbe / into waits: losing
  // clearly where that is under a third of spinning's (it would need half as many again to win).
  if (3 * sleep_waits * absl::ToInt64Nanoseconds(kProbe) < spin_waits * into_ns) {
    Choose(cycle, into_ns);
  }
}

void WaitPolicy::Choose(int64_t cycle, int64_t sleep_probe_ns) {
  int64_t last = chosen_in_cycle_.load(std::memory_order_relaxed);
  if (last >= cycle || !chosen_in_cycle_.compare_exchange_strong(last, cycle)) return;
  const Probe& spin = probes_[kSpinProbe];
  const Probe& sleep = probes_[kSleepProbe];
  // Probes that did not see waits from their start to their end (the process began, or the
  // caller turned to other work, within one) compare different things: the next cycle probes
  // again.
  if (!Spanned(spin, cycle, absl::ToInt64Nanoseconds(kProbe)) ||
      !Spanned(sleep, cycle, sleep_probe_ns)) {
    return;
  }
  const int64_t spin_waits = spin.waits.load(std::memory_order_relaxed);
  const int64_t sleep_waits = sleep.waits.load(std::memory_order_relaxed);
  if (spin_waits + sleep_waits < kFewestWaits) return;  // The next cycle probes again.
  // Sleeping must end half as many again: spinning is the better bet when they are close.
  const bool spin_wins = 2 * sleep_waits < 3 * spin_waits;
  int between = 1;
  if (spin_wins == spin_chosen_.load(std::memory_order_relaxed)) {
    between = std::min(2 * cycles_between_probes_.load(std::memory_order_relaxed), kMostCycles);
  }
  cycles_between_probes_.store(between, std::memory_order_relaxed);
  spin_chosen_.store(spin_wins, std::memory_order_relaxed);
  next_probe_cycle_.store(cycle + between, std::memory_order_relaxed);
}

}  // namespace plexus::tcp
