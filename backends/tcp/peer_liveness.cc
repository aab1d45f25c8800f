#include "backends/tcp/peer_liveness.h"

#include "absl/strings/str_cat.h"
#include "base/core/heartbeat.h"

namespace plexus::tcp {
namespace {

// Checks run twice per beat period, so silence is judged within a tenth of the interval.
absl::Duration CheckPeriod(absl::Duration interval) { return HeartbeatPeriod(interval) / 2; }

}  // namespace

PeerLiveness::PeerLiveness(int rank, std::vector<bool> connected, absl::Duration heartbeat,
                           absl::Time now)
    : rank_(rank), heartbeat_(heartbeat), peers_(connected.size()), last_check_(now) {
  for (size_t p = 0; p < connected.size(); ++p) {
    peers_[p].alive = connected[p];
    peers_[p].last_heard = now;
  }
  if (heartbeat_ != absl::InfiniteDuration()) next_check_ = now + CheckPeriod(heartbeat_);
}

bool PeerLiveness::AnyoneAlive() const {
  for (const Peer& peer : peers_) {
    if (peer.alive) return true;
  }
  return false;
}

std::vector<int> PeerLiveness::LostPeers() const {
  std::vector<int> lost;
  for (int p = 0; p < size(); ++p) {
    if (p != rank_ && !peers_[p].alive && !peers_[p].departed) lost.push_back(p);
  }
  return lost;
}

bool PeerLiveness::MarkLost(int peer) {
  if (!peers_[peer].alive) return false;
  peers_[peer].alive = false;
  return true;
}

void PeerLiveness::MarkDeparted(int peer) {
  peers_[peer].alive = false;
  peers_[peer].departed = true;
}

bool PeerLiveness::BeginCheck(absl::Time now) {
  // This rank did not look for a while (it was stopped itself, or starved of CPU): what it
  // missed hearing says nothing about the peers, so their silence counts from now.
  const bool was_away = now - last_check_ > heartbeat_ / 2;
  last_check_ = now;
  next_check_ = now + CheckPeriod(heartbeat_);
  return was_away;
}

bool PeerLiveness::Silent(int p, absl::Time now, bool was_away, Verdict& verdict) {
  Peer& peer = peers_[p];
  if (peer.heard || was_away) {
    peer.heard = false;
    peer.last_heard = now;
    return false;
  }
  if (now - peer.last_heard <= heartbeat_) return false;
  verdict.silent.emplace_back(
      p, absl::StrCat("silent for ", absl::FormatDuration(now - peer.last_heard),
                      ", past the heartbeat interval of ", absl::FormatDuration(heartbeat_),
                      " (stopped, frozen or unreachable; PLEXUS_HEARTBEAT sets it)"));
  return true;
}

bool PeerLiveness::BeatDue(int p, absl::Time now) {
  Peer& peer = peers_[p];
  if (now - peer.last_beat < HeartbeatPeriod(heartbeat_)) return false;
  peer.last_beat = now;
  return true;
}

}  // namespace plexus::tcp
