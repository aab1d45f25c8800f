// WaitPolicy: whether a thread waiting for a peer spins before it sleeps. Spinning wins on cores
// that hold only the ranks, sleeping at once beside busy work, and no single wait tells the two
// apart; so every waiter of a process probes both on the wall clock's cycle (all ranks of a host
// together) and keeps what ended more waits. The rules and the measurements behind them:
// docs/architecture.md ("Waiting policy") and docs/benchmarks.md.
#ifndef PLEXUS_BACKENDS_TCP_WAIT_POLICY_H_
#define PLEXUS_BACKENDS_TCP_WAIT_POLICY_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace plexus::tcp {

class WaitPolicy {
 public:
  enum class Mode {
    kAdaptive,  // Probe both ways and keep the faster (the default).
    kSpin,      // Always spin first.
    kSleep,     // Never spin: for ranks that share their cores with other work all the time.
  };

  static constexpr absl::Duration kCycle = absl::Seconds(1);
  static constexpr absl::Duration kProbe = absl::Milliseconds(40);
  static constexpr int kMostCycles = 8;
  // Fewer waits than this in the two probes together (the caller was mostly elsewhere) decide
  // nothing.
  static constexpr int kFewestWaits = 16;
  // A sleep probe ends early only after this much of it, and against a spin probe that ended
  // at least this many waits.
  static constexpr absl::Duration kEarliestEnd = absl::Milliseconds(10);  // kProbe / 4
  static constexpr int kFewestWaitsToEndEarly = 256;

  explicit WaitPolicy(Mode mode) : mode_(mode) {}

  // The policy every waiter of this process shares (the cores are the process's), in
  // PLEXUS_WAIT's mode; adaptive where that is unset or invalid (TcpTransport refuses to
  // start with an invalid one, through ModeFromEnvironment).
  static WaitPolicy& Shared();
  // PLEXUS_WAIT: `adaptive` (or unset), `spin` or `sleep`; InvalidArgument naming the value.
  static absl::StatusOr<Mode> ModeFromEnvironment();
  static absl::StatusOr<Mode> ParseMode(absl::string_view text);

  // Whether a wait beginning at `now` spins before it sleeps.
  bool SpinNow(absl::Time now);
  // A wait ended at `now` (however short it was).
  void WaitEnded(absl::Time now);

 private:
  enum Phase { kSpinProbe = 0, kSleepProbe = 1, kChosen = 2 };
  // The phase of the cycle `now` falls in (kChosen in cycles that do not probe).
  Phase PhaseAt(absl::Time now, int64_t* cycle) const;
  struct Probe;
  // At the first look into cycle `cycle`'s chosen part, or when its sleep probe ends early
  // (`sleep_probe_ns` into it): compare its probes.
  void Choose(int64_t cycle, int64_t sleep_probe_ns);
  // Whether `probe` is cycle `cycle`'s and saw waits from its first quarter on to within a
  // quarter probe of `until_ns` into it.
  bool Spanned(const Probe& probe, int64_t cycle, int64_t until_ns) const;
  // In cycle `cycle`'s sleep probe, `into` it: ends the probe (choosing) if it is clearly
  // losing.
  void MaybeEndSleepProbe(int64_t cycle, int64_t into_ns);

  const Mode mode_;
  std::atomic<bool> spin_chosen_{true};
  std::atomic<int64_t> chosen_in_cycle_{-1};
  std::atomic<int64_t> next_probe_cycle_{0};   // Cycles before it only do what was chosen,
  std::atomic<int> cycles_between_probes_{1};  // which stayed the same this many times.
  // Per probe: its cycle, the waits that ended in it, and when (ns into the probe) the first
  // and the latest of them ended.
  struct Probe {
    std::atomic<int64_t> cycle{-1};
    std::atomic<int64_t> waits{0};
    std::atomic<int64_t> first_ns{0};
    std::atomic<int64_t> last_ns{0};
  };
  Probe probes_[2];
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_WAIT_POLICY_H_
