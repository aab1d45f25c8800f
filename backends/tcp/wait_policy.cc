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
  return into < probe ? kSpinProbe : into < 2 * probe ? kSleepProbe : kChosen;
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
    Choose(cycle);
  }
  return spin_chosen_.load(std::memory_order_relaxed);
}

void WaitPolicy::WaitEnded(absl::Time now) {
  if (mode_ != Mode::kAdaptive) return;
  int64_t cycle;
  const Phase phase = PhaseAt(now, &cycle);
  if (phase == kChosen) return;
  Probe& probe = probes_[phase];
  int64_t seen = probe.cycle.load(std::memory_order_relaxed);
  if (seen != cycle) {
    // The first wait of this probe clears the last one's count (a racing one may be lost).
    if (seen > cycle || !probe.cycle.compare_exchange_strong(seen, cycle)) {
      if (probe.cycle.load(std::memory_order_relaxed) != cycle) return;
    } else {
      probe.waits.store(0, std::memory_order_relaxed);
    }
  }
  probe.waits.fetch_add(1, std::memory_order_relaxed);
}

void WaitPolicy::Choose(int64_t cycle) {
  int64_t last = chosen_in_cycle_.load(std::memory_order_relaxed);
  if (last >= cycle || !chosen_in_cycle_.compare_exchange_strong(last, cycle)) return;
  const Probe& spin = probes_[kSpinProbe];
  const Probe& sleep = probes_[kSleepProbe];
  const int64_t spin_waits = spin.cycle.load(std::memory_order_relaxed) == cycle
                                 ? spin.waits.load(std::memory_order_relaxed)
                                 : 0;
  const int64_t sleep_waits = sleep.cycle.load(std::memory_order_relaxed) == cycle
                                  ? sleep.waits.load(std::memory_order_relaxed)
                                  : 0;
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
