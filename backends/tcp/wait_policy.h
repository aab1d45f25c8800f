// WaitPolicy: whether a thread waiting for a peer spins (polls, yielding its core between
// polls) before it sleeps. Spinning pays while the cores hold only the ranks, even where ranks
// outnumber them: a yield hands the core to a peer that has work, and data due in microseconds
// is seen at once. Beside work that keeps cores busy (busy loops, a training step's compute
// threads) it costs: the spinners keep their cores looking busy, and a peer that has work
// queues behind the other work instead of taking a core a sleeper would leave idle. On the
// 2-core VM, 4 ranks beside two busy loops took 1.4-1.8 ms for a 1 KiB all-reduce when they
// spun first and 0.24 ms when they slept at once; on quiet cores, and beside a second job that
// communicates, spinning first was 2-4x faster. Nothing one wait sees tells these apart (its
// yields, and how often its spin runs out, look alike in both), so the policy tries both:
//
// Every kCycle of wall-clock time, waits spin first for kProbe, then sleep at once for kProbe,
// and for the rest of the cycle do what ended more waits (spin first, unless sleeping ended at
// least half as many again). Ended waits, not their mean length, are compared: spinning ends
// many waits in microseconds while the few that a peer stuck behind other work holds up take
// milliseconds, so its mean can look short while its collectives are slow. Where the caller
// computes between collectives, both probes end waits at its pace, and spinning stays. The
// probes follow the wall clock, so all ranks of a host switch at the same moments: how one
// waits decides how long its peers wait, so only together do they compare ways of waiting
// (probes that each rank timed by its own count of waits overlapped and chose wrongly). While
// the choice stays the same the probes come less often, every 2, 4, then kMostCycles cycles;
// a change of choice brings them back to every cycle. A sleep probe that is clearly losing
// ends early: from kEarliestEnd into it, once its pace would end under a third of the waits of
// a busy spin probe (kFewestWaitsToEndEarly or more), the cycle chooses spinning at once. On
// quiet cores sleeping ran at 11-18% of spinning's pace (4 ranks, 2-core VM), so they pay for
// a quarter of the probe instead of all of it. Beside busy loops the first milliseconds of a
// sleep probe say little (one time slice can hold them: 1-5 waits against 330-415 in the whole
// probe), and their spin probes end fewer waits (60-120) than a busy one.
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
