// The tcp loop's heartbeats: every peer hears from this rank at least a fifth of the interval
// apart, and a peer from which nothing arrived (frames, heartbeats, doorbells) for the whole
// interval is lost, so a frozen process fails its peers' operations as a dead one does.
// LostPeers reports who was lost.
#include <memory>

#include "absl/strings/str_cat.h"
#include "backends/tcp/tcp_loop.h"
#include "base/core/heartbeat.h"

namespace plexus::tcp {
namespace {

// Checks run twice per beat period, so silence is judged within a tenth of the interval.
absl::Duration CheckPeriod(absl::Duration interval) { return HeartbeatPeriod(interval) / 2; }

}  // namespace

void Loop::StartHeartbeats(absl::Time now) {
  if (heartbeat_ == absl::InfiniteDuration()) return;
  for (Peer& peer : peers_) {
    peer.last_heard = now;
    peer.last_beat = absl::InfinitePast();  // The first check beats at once.
  }
  last_check_ = now;
  next_check_ = now + CheckPeriod(heartbeat_);
}

void Loop::CheckHeartbeats(absl::Time now) {
  // This rank did not look for a while (it was stopped itself, or starved of CPU): what it
  // missed hearing says nothing about the peers, so their silence counts from now.
  const bool was_away = now - last_check_ > heartbeat_ / 2;
  last_check_ = now;
  next_check_ = now + CheckPeriod(heartbeat_);
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    Peer& peer = peers_[p];
    if (!peer.alive) continue;
    if (peer.heard || was_away) {
      peer.heard = false;
      peer.last_heard = now;
    } else if (now - peer.last_heard > heartbeat_) {
      PeerLost(p,
               absl::StrCat("silent for ", absl::FormatDuration(now - peer.last_heard),
                            ", past the heartbeat interval of ", absl::FormatDuration(heartbeat_),
                            " (stopped, frozen or unreachable; PLEXUS_HEARTBEAT sets it)"));
      continue;
    }
    // A peer with frames still queued hears those; an idle one gets a header-only beat.
    if (peer.tx.empty() && now - peer.last_beat >= HeartbeatPeriod(heartbeat_)) {
      peer.last_beat = now;
      auto beat = std::make_shared<Op>();
      beat->kind = Op::Kind::kSend;
      beat->peer = p;
      beat->size = 0;
      beat->work = std::make_shared<Work>("heartbeat", static_cast<int>(peers_.size()));
      EncodeHeader(beat->header, FrameType::kHeartbeat, 0, 0, 0);
      QueueFrame(p, beat);
    }
  }
}

std::vector<int> Loop::LostPeers() const {
  std::vector<int> lost;
  for (int i = 0; i < static_cast<int>(peers_.size()); ++i) {
    if (i != rank_ && !peers_[i].alive && !peers_[i].departed) lost.push_back(i);
  }
  return lost;
}

}  // namespace plexus::tcp
