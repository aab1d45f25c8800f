// Which of a rank's peers are still there, and the heartbeat clock that decides it: every peer
// hears from this rank at least a fifth of the interval apart, and a peer from which nothing
// arrived (frames, heartbeats, doorbells) for the whole interval is lost, so a frozen process
// fails its peers' operations as a dead one does. It holds no sockets: the loop says what it
// heard and acts on what Check decides, so the rules are testable with a clock alone.
#ifndef PLEXUS_BACKENDS_TCP_PEER_LIVENESS_H_
#define PLEXUS_BACKENDS_TCP_PEER_LIVENESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace plexus::tcp {

class PeerLiveness {
 public:
  // `connected[p]`: whether peer p has a connection at all (this rank's own slot has none).
  // `heartbeat`: silence after which a peer is lost (InfiniteDuration: never, and no beats).
  PeerLiveness(int rank, std::vector<bool> connected, absl::Duration heartbeat, absl::Time now);

  int size() const { return static_cast<int>(peers_.size()); }
  bool alive(int peer) const { return peers_[peer].alive; }
  bool departed(int peer) const { return peers_[peer].departed; }
  bool AnyoneAlive() const;
  // Peers lost (not departed with a goodbye), in rank order; never this rank.
  std::vector<int> LostPeers() const;

  // Bytes of any kind arrived from `peer`.
  void Heard(int peer) { peers_[peer].heard = true; }
  // False if `peer` was no longer alive (it was lost or departed already).
  bool MarkLost(int peer);
  void MarkDeparted(int peer);

  // What a check decided: peers silent past the interval (with why), and idle peers that are
  // due a beat from this rank.
  struct Verdict {
    std::vector<std::pair<int, std::string>> silent;
    std::vector<int> beat;
  };
  absl::Time next_check() const { return next_check_; }
  // Runs the check due at next_check(). `has_queued(p)`: frames to p are already waiting to go
  // out (they serve as its beat). Silent peers are not marked lost here: the caller does, with
  // MarkLost, as it fails their work.
  template <typename HasQueued>
  Verdict Check(absl::Time now, HasQueued has_queued);

 private:
  struct Peer {
    bool alive = false;
    bool departed = false;                        // Said goodbye: not lost.
    bool heard = false;                           // Bytes arrived since the last check.
    absl::Time last_heard;                        // When a check last found `heard` (or the start).
    absl::Time last_beat = absl::InfinitePast();  // The first check beats at once.
  };
  // Starts a check at `now`: whether this rank was away, and the next check's time.
  bool BeginCheck(absl::Time now);
  // Judges one alive peer; true if it is silent past the interval (the reason goes to `verdict`).
  bool Silent(int peer, absl::Time now, bool was_away, Verdict& verdict);
  bool BeatDue(int peer, absl::Time now);

  const int rank_;
  const absl::Duration heartbeat_;
  std::vector<Peer> peers_;
  absl::Time last_check_;
  absl::Time next_check_ = absl::InfiniteFuture();
};

template <typename HasQueued>
PeerLiveness::Verdict PeerLiveness::Check(absl::Time now, HasQueued has_queued) {
  Verdict verdict;
  const bool was_away = BeginCheck(now);
  for (int p = 0; p < size(); ++p) {
    if (!peers_[p].alive || Silent(p, now, was_away, verdict)) continue;
    // A peer with frames still queued hears those; an idle one gets a header-only beat.
    if (!has_queued(p) && BeatDue(p, now)) verdict.beat.push_back(p);
  }
  return verdict;
}

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_PEER_LIVENESS_H_
