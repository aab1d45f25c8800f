#include "frontend/elastic/master_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/elastic/ring_order.h"

namespace plexus::elastic {
namespace {

// When a request carrying a timeout of `milliseconds` from now expires.
absl::Time ExpiresAfter(int64_t milliseconds) {
  return absl::Now() + absl::Milliseconds(std::max<int64_t>(milliseconds, 0));
}

}  // namespace

MasterState::MasterState(int64_t store_port, absl::Duration heartbeat_timeout)
    : store_port_(store_port), heartbeat_timeout_(heartbeat_timeout) {}

std::string MasterState::Describe(int64_t peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return absl::StrCat("peer ", peer);
  return absl::StrCat("peer ", peer, " (", it->second.address, ", group ", it->second.group, ")");
}

int64_t MasterState::accepted_count() const {
  int64_t count = 0;
  for (const auto& [id, peer] : peers_) count += peer.accepted ? 1 : 0;
  return count;
}

int64_t MasterState::pending_count() const {
  return static_cast<int64_t>(peers_.size()) - accepted_count();
}

int64_t MasterState::Join(int64_t group, const std::string& address) {
  const int64_t id = next_peer_++;
  Peer& peer = peers_[id];
  peer.group = group;
  peer.address = address;
  outgoing_.push_back({id, Message{MessageType::kWelcome,
                                   {id, store_port_, absl::ToInt64Milliseconds(heartbeat_timeout_)},
                                   ""}});
  if (accepted_count() == 0) AcceptPending();  // Nobody to agree with: in at once.
  return id;
}

absl::Status MasterState::Handle(int64_t id, const Message& message) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return absl::NotFoundError(absl::StrCat("unknown peer ", id));
  Peer& peer = it->second;
  switch (message.type) {
    case MessageType::kHeartbeat:
      return absl::OkStatus();
    case MessageType::kUpdateTopology:
      return HandleUpdateTopology(id, message);
    case MessageType::kArePeersPending: {
      if (message.ints.size() != 1) return absl::InvalidArgumentError("malformed request");
      if (!peer.accepted) {
        Reply(id, message.ints[0],
              absl::FailedPreconditionError(
                  "this peer has not been accepted yet: connect() must return first"),
              0);
        return absl::OkStatus();
      }
      Reply(id, message.ints[0], absl::OkStatus(), pending_count() > 0 ? 1 : 0);
      return absl::OkStatus();
    }
    case MessageType::kOpStart:
      return HandleOpStart(id, message);
    case MessageType::kOpDone:
      return HandleOpDone(id, message);
    case MessageType::kSyncState:
      return HandleSyncState(id, message);
    case MessageType::kSyncDone:
      return HandleSyncDone(id, message);
    case MessageType::kOptimizeStart:
      return HandleOptimizeStart(id, message);
    case MessageType::kOptimizeReport:
      return HandleOptimizeReport(id, message);
    case MessageType::kLeave:
      Drop(id, absl::StrCat(Describe(id), " left"));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected message type ", static_cast<int>(message.type)));
  }
}

absl::Status MasterState::HandleUpdateTopology(int64_t id, const Message& message) {
  if (message.ints.size() != 2) return absl::InvalidArgumentError("malformed update_topology");
  const int64_t request = message.ints[0];
  Peer& peer = peers_.at(id);
  if (!peer.accepted) {
    Reply(id, request,
          absl::FailedPreconditionError(
              "this peer has not been accepted yet: connect() must return first"),
          0);
    return absl::OkStatus();
  }
  if (peer.waiting_request >= 0) {
    Reply(id, request,
          absl::FailedPreconditionError(
              "update_topology is already waiting for this peer (called from two threads?)"),
          0);
    return absl::OkStatus();
  }
  if (pending_count() == 0) {
    Reply(id, request, absl::OkStatus(), 0);
    return absl::OkStatus();
  }
  peer.waiting_request = request;
  peer.waiting_since = absl::Now();
  peer.waiting_expires = ExpiresAfter(message.ints[1]);
  SettleUpdateRound();
  return absl::OkStatus();
}

void MasterState::SettleUpdateRound() {
  bool everyone = true, anyone = false;
  for (const auto& [id, peer] : peers_) {
    if (!peer.accepted) continue;
    if (peer.waiting_request < 0) {
      everyone = false;
    } else {
      anyone = true;
    }
  }
  if (!anyone) return;
  const bool pending = pending_count() > 0;
  std::vector<std::pair<int64_t, int64_t>> released;
  for (auto& [id, peer] : peers_) {
    if (!peer.accepted || peer.waiting_request < 0) continue;
    if (everyone && pending) {
      released.emplace_back(id, peer.waiting_request);
    } else if (!pending || NeededElsewhere(id)) {
      Reply(id, peer.waiting_request, absl::OkStatus(), 0);  // No change: go and join it.
    } else {
      continue;
    }
    peer.waiting_request = -1;
  }
  if (released.empty()) return;
  AcceptPending();  // Pushes the new topologies before the replies below.
  for (const auto& [id, request] : released) Reply(id, request, absl::OkStatus(), 1);
}

bool MasterState::NeededElsewhere(int64_t id) const {
  auto group_it = groups_.find(peers_.at(id).group);
  if (group_it == groups_.end()) return false;
  const Group& group = group_it->second;
  if (!group.sync.planned && !group.sync.ballots.empty() && !group.sync.ballots.count(id)) {
    return true;
  }
  if (!group.optimize.measuring && !group.optimize.started.empty() &&
      !group.optimize.started.count(id)) {
    return true;
  }
  for (const auto& [key, vote] : group.ops) {
    if (!vote.decided && !vote.started.empty() && !vote.started.count(id)) return true;
  }
  return false;
}

std::string MasterState::Activity(int64_t id) const {
  const Peer& peer = peers_.at(id);
  if (!peer.accepted) return "pending";
  if (peer.waiting_request >= 0) return "in update_topology";
  auto group_it = groups_.find(peer.group);
  if (group_it != groups_.end()) {
    const Group& group = group_it->second;
    if (group.sync.ballots.count(id)) return "in sync_shared_state";
    if (group.optimize.started.count(id)) return "in optimize_topology";
    std::vector<std::string> tags;
    for (const auto& [key, vote] : group.ops) {
      if (vote.started.count(id) && !vote.done.count(id)) tags.push_back(absl::StrCat(key.tag));
    }
    if (!tags.empty()) return absl::StrCat("in all-reduces with tags ", absl::StrJoin(tags, ","));
  }
  return "in none of the elastic calls";
}

std::string MasterState::Missing(const std::vector<int64_t>& among,
                                 const std::set<int64_t>& arrived) const {
  std::vector<std::string> missing;
  for (int64_t id : among) {
    if (arrived.count(id) || !peers_.count(id)) continue;
    missing.push_back(absl::StrCat(Describe(id), " (", Activity(id), ")"));
  }
  return missing.empty() ? "nobody" : absl::StrJoin(missing, ", ");
}

absl::Time MasterState::NextExpiry() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, peer] : peers_) {
    if (peer.waiting_request >= 0) next = std::min(next, peer.waiting_expires);
  }
  for (const auto& [group_id, group] : groups_) {
    if (!group.sync.planned) {
      for (const auto& [id, entry] : group.sync.ballots) next = std::min(next, entry.first.expires);
    }
    if (!group.optimize.measuring) {
      for (const auto& [id, waiting] : group.optimize.started)
        next = std::min(next, waiting.expires);
    }
  }
  return next;
}

void MasterState::Expire(absl::Time now) {
  std::vector<int64_t> accepted, pending;
  std::set<int64_t> in_update;
  for (const auto& [id, peer] : peers_) {
    (peer.accepted ? accepted : pending).push_back(id);
    if (peer.waiting_request >= 0) in_update.insert(id);
  }
  for (auto& [id, peer] : peers_) {
    if (peer.waiting_request < 0 || now < peer.waiting_expires) continue;
    std::vector<std::string> joining;
    for (int64_t p : pending) joining.push_back(Describe(p));
    Reply(id, peer.waiting_request,
          absl::DeadlineExceededError(absl::StrCat(
              "update_topology waited ", absl::FormatDuration(now - peer.waiting_since),
              " to accept ", absl::StrJoin(joining, ", "),
              "; these accepted peers never called it: ", Missing(accepted, in_update))),
          0);
    peer.waiting_request = -1;
  }
  for (auto& [group_id, group] : groups_) {
    std::set<int64_t> voted;
    for (const auto& [id, entry] : group.sync.ballots) voted.insert(id);
    for (auto it = group.sync.ballots.begin();
         !group.sync.planned && it != group.sync.ballots.end();) {
      if (now < it->second.first.expires) {
        ++it;
        continue;
      }
      Reply(it->first, it->second.first.request,
            absl::DeadlineExceededError(
                absl::StrCat("sync_shared_state of peer group ", group_id, " (epoch ", group.epoch,
                             ") timed out waiting for ", Missing(group.ring, voted))),
            0);
      it = group.sync.ballots.erase(it);
    }
    std::set<int64_t> started;
    for (const auto& [id, waiting] : group.optimize.started) started.insert(id);
    for (auto it = group.optimize.started.begin();
         !group.optimize.measuring && it != group.optimize.started.end();) {
      if (now < it->second.expires) {
        ++it;
        continue;
      }
      Reply(it->first, it->second.request,
            absl::DeadlineExceededError(
                absl::StrCat("optimize_topology of peer group ", group_id, " (epoch ", group.epoch,
                             ") timed out waiting for ", Missing(group.ring, started))),
            0);
      it = group.optimize.started.erase(it);
    }
  }
}

size_t MasterState::HeldEntries() const {
  size_t entries = 0;
  for (const auto& [id, peer] : peers_) entries += peer.waiting_request >= 0 ? 1 : 0;
  for (const auto& [id, group] : groups_) {
    entries += group.ops.size() + group.sync.ballots.size() + group.sync.done.size() +
               group.optimize.started.size() + group.optimize.reports.size();
  }
  return entries;
}

void MasterState::AcceptPending() {
  std::set<int64_t> changed;
  for (auto& [id, peer] : peers_) {
    if (peer.accepted) continue;
    peer.accepted = true;
    groups_[peer.group].ring.push_back(id);
    changed.insert(peer.group);
  }
  for (int64_t group : changed) {
    NewEpoch(group, absl::UnavailableError("new peers joined the group"));
  }
  if (!changed.empty()) PushTopologies();
  FlushDeferredOutcomes();
}

void MasterState::NewEpoch(int64_t group_id, const absl::Status& reason) {
  Group& group = groups_[group_id];
  ++group.epoch;
  group.arena_turns = 0;
  const std::string over =
      absl::StrCat("; epoch ", group.epoch - 1, " of peer group ", group_id, " is over");
  deferring_ = true;  // What this says reaches peers after the new topology.
  for (auto& [key, vote] : group.ops) {
    if (vote.decided) continue;
    const absl::Status outcome(reason.code(), absl::StrCat(reason.message(), over));
    for (int64_t peer : vote.started) {
      if (peers_.count(peer)) SendOutcome(peer, key, outcome);
    }
  }
  group.ops.clear();
  AbandonSync(group, absl::UnavailableError(absl::StrCat(reason.message(), over)));
  AbandonOptimize(
      group, absl::UnavailableError(absl::StrCat("optimize_topology: ", reason.message(), over)));
  deferring_ = false;
}

void MasterState::FlushDeferredOutcomes() {
  for (Outgoing& message : deferred_) outgoing_.push_back(std::move(message));
  deferred_.clear();
}

void MasterState::PushTopologies() {
  int64_t global = 0, groups = 0, largest = 0;
  for (const auto& [id, group] : groups_) {
    const int64_t size = static_cast<int64_t>(group.ring.size());
    global += size;
    groups += size > 0 ? 1 : 0;
    largest = std::max(largest, size);
  }
  for (const auto& [id, peer] : peers_) {
    if (!peer.accepted) continue;
    const Group& group = groups_[peer.group];
    Topology topology{peer.group, group.epoch, group.ring, global, groups, largest};
    outgoing_.push_back({id, Message{MessageType::kTopology, TopologyInts(topology), ""}});
  }
}

void MasterState::Drop(int64_t id, const std::string& reason) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  const Peer peer = it->second;
  peers_.erase(it);
  if (!peer.accepted) return;
  Group& group = groups_[peer.group];
  group.ring.erase(std::remove(group.ring.begin(), group.ring.end(), id), group.ring.end());
  // Topologies first: a survivor learns the new epoch before the failures it causes.
  NewEpoch(peer.group, absl::UnavailableError(reason));
  PushTopologies();
  FlushDeferredOutcomes();
  if (accepted_count() == 0) {
    AcceptPending();
  } else {
    SettleUpdateRound();
  }
}

void MasterState::SendOutcome(int64_t peer, const OpKey& key, const absl::Status& outcome) {
  Message message{MessageType::kOpOutcome, {}, std::string(outcome.message())};
  AppendOpKey(key, message.ints);
  message.ints.push_back(static_cast<int64_t>(outcome.code()));
  (deferring_ ? deferred_ : outgoing_).push_back({peer, std::move(message)});
}

void MasterState::Reply(int64_t peer, int64_t request, const absl::Status& status, int64_t value,
                        const std::vector<int64_t>& extra) {
  Message reply{MessageType::kReply,
                {request, static_cast<int64_t>(status.code()), value},
                std::string(status.message())};
  reply.ints.insert(reply.ints.end(), extra.begin(), extra.end());
  (deferring_ ? deferred_ : outgoing_).push_back({peer, std::move(reply)});
}

void MasterState::AbandonSync(Group& group, const absl::Status& reason) {
  SyncRound& sync = group.sync;
  auto fail = [&](int64_t peer, int64_t request) {
    if (peers_.count(peer)) Reply(peer, request, reason, 0);
  };
  if (!sync.planned) {
    for (const auto& [peer, ballot] : sync.ballots) fail(peer, ballot.first.request);
  }
  if (sync.failure.ok()) {  // After a failure every report was answered already.
    for (const auto& [peer, request] : sync.done) fail(peer, request);
  }
  sync = SyncRound{};
}

void MasterState::AbandonOptimize(Group& group, const absl::Status& reason) {
  OptimizeRound& optimize = group.optimize;
  auto fail = [&](int64_t peer, int64_t request) {
    if (peers_.count(peer)) Reply(peer, request, reason, 0);
  };
  if (!optimize.measuring) {
    for (const auto& [peer, waiting] : optimize.started) fail(peer, waiting.request);
  }
  if (optimize.failure.ok()) {
    for (const auto& [peer, report] : optimize.reports) fail(peer, report.first);
  }
  optimize = OptimizeRound{};
}

bool MasterState::RequestInCurrentEpoch(int64_t id, int64_t request, int64_t epoch) {
  const Peer& peer = peers_.at(id);
  if (!peer.accepted) {
    Reply(id, request, absl::FailedPreconditionError("this peer has not been accepted yet"), 0);
    return false;
  }
  const int64_t now = groups_[peer.group].epoch;
  if (epoch != now) {
    Reply(id, request,
          absl::UnavailableError(absl::StrCat("epoch ", epoch, " of peer group ", peer.group,
                                              " is over (now ", now, "): retry")),
          0);
    return false;
  }
  return true;
}

absl::Status MasterState::HandleOptimizeStart(int64_t id, const Message& message) {
  if (message.ints.size() != 3) return absl::InvalidArgumentError("malformed optimize start");
  const int64_t request = message.ints[0];
  if (!RequestInCurrentEpoch(id, request, message.ints[1])) return absl::OkStatus();
  Group& group = groups_[peers_.at(id).group];
  OptimizeRound& optimize = group.optimize;
  if (optimize.measuring || optimize.started.count(id)) {
    Reply(id, request, absl::UnavailableError("the previous optimize_topology is still ending"), 0);
    return absl::OkStatus();
  }
  optimize.epoch = group.epoch;
  optimize.started[id] = Waiting{request, ExpiresAfter(message.ints[2])};
  if (optimize.started.size() < group.ring.size()) {
    SettleUpdateRound();  // Members waiting in update_topology are needed here.
    return absl::OkStatus();
  }
  optimize.measuring = true;
  const int64_t number = group.optimizations++;
  for (const auto& [peer, waiting] : optimize.started) {
    Reply(peer, waiting.request, absl::OkStatus(), number);
  }
  return absl::OkStatus();
}

absl::Status MasterState::HandleOptimizeReport(int64_t id, const Message& message) {
  if (message.ints.size() < 3) return absl::InvalidArgumentError("malformed optimize report");
  const int64_t request = message.ints[0];
  if (!RequestInCurrentEpoch(id, request, message.ints[1])) return absl::OkStatus();
  const int64_t group_id = peers_.at(id).group;
  Group& group = groups_[group_id];
  OptimizeRound& optimize = group.optimize;
  const absl::Status reported = StatusFromWire(message.ints[2], message.text);
  std::vector<int64_t> row(message.ints.begin() + 3, message.ints.end());
  if (!optimize.measuring || !optimize.started.count(id) || optimize.reports.count(id)) {
    Reply(id, request, absl::UnavailableError("optimize_topology was abandoned: retry"), 0);
    return absl::OkStatus();
  }
  if (reported.ok() && row.size() != group.ring.size()) {
    return absl::InvalidArgumentError("optimize report of the wrong size");
  }
  if (!reported.ok() && optimize.failure.ok()) {
    optimize.failure =
        absl::Status(reported.code(), absl::StrCat(Describe(id), ": ", reported.message()));
    for (const auto& [peer, report] : optimize.reports)
      Reply(peer, report.first, optimize.failure, 0);
  }
  optimize.reports[id] = {request, std::move(row)};
  if (!optimize.failure.ok()) Reply(id, request, optimize.failure, 0);
  if (optimize.reports.size() == group.ring.size()) {
    if (optimize.failure.ok()) {
      FinishOptimize(group_id);
    } else {
      optimize = OptimizeRound{};
    }
  }
  return absl::OkStatus();
}

void MasterState::FinishOptimize(int64_t group_id) {
  Group& group = groups_[group_id];
  const size_t n = group.ring.size();
  BandwidthMatrix bandwidth(n, std::vector<double>(n, 0));
  for (size_t to = 0; to < n; ++to) {
    const std::vector<int64_t>& row = group.optimize.reports.at(group.ring[to]).second;
    for (size_t from = 0; from < n; ++from) bandwidth[from][to] = static_cast<double>(row[from]);
  }
  std::vector<int> current(n);
  for (size_t i = 0; i < n; ++i) current[i] = static_cast<int>(i);
  const std::vector<int> best = BestRing(bandwidth);
  // Only a clear gain is worth a new epoch (the measurements are noisy).
  const bool change = Bottleneck(best, bandwidth) > 1.1 * Bottleneck(current, bandwidth);
  std::vector<std::pair<int64_t, int64_t>> waiting;
  for (const auto& [peer, report] : group.optimize.reports)
    waiting.emplace_back(peer, report.first);
  group.optimize = OptimizeRound{};
  if (change) {
    std::vector<int64_t> ring;
    for (int i : best) ring.push_back(group.ring[i]);
    group.ring = std::move(ring);
    NewEpoch(group_id, absl::UnavailableError("optimize_topology reordered the ring"));
    PushTopologies();
    FlushDeferredOutcomes();
  }
  for (const auto& [peer, request] : waiting)
    Reply(peer, request, absl::OkStatus(), change ? 1 : 0);
}

absl::Status MasterState::HandleSyncState(int64_t id, const Message& message) {
  if (message.ints.size() < 3) return absl::InvalidArgumentError("malformed shared-state sync");
  const int64_t request = message.ints[0];
  const int64_t epoch = message.ints[1];
  const absl::Time expires = ExpiresAfter(message.ints[2]);
  auto ballot = ReadBallot(message.ints, 3, message.text);
  if (!ballot.ok()) return ballot.status();
  if (!RequestInCurrentEpoch(id, request, epoch)) return absl::OkStatus();
  Peer& peer = peers_.at(id);
  Group& group = groups_[peer.group];
  SyncRound& sync = group.sync;
  if (sync.planned && sync.done.count(id)) {  // Its last sync failed; others still report.
    Reply(id, request, absl::UnavailableError("the previous shared-state sync is still ending"), 0);
    return absl::OkStatus();
  }
  if (sync.planned || sync.ballots.count(id)) {
    return absl::InvalidArgumentError("a shared-state ballot while this peer's last sync runs");
  }
  sync.epoch = epoch;
  ballot->peer = id;
  ballot->description = Describe(id);
  ballot->holds_group_state = peer.holds_group_state;
  sync.ballots[id] = {Waiting{request, expires}, std::move(ballot).value()};
  if (sync.ballots.size() == group.ring.size()) {
    PlanGroupSync(peer.group);
  } else {
    SettleUpdateRound();  // Members waiting in update_topology are needed here.
  }
  return absl::OkStatus();
}

void MasterState::PlanGroupSync(int64_t group_id) {
  Group& group = groups_[group_id];
  SyncRound& sync = group.sync;
  std::vector<SyncBallot> ballots;
  for (int64_t member : group.ring) ballots.push_back(sync.ballots.at(member).second);
  auto plan = PlanSync(ballots);
  if (!plan.ok()) {
    AbandonSync(group, plan.status());
    return;
  }
  std::map<int64_t, std::vector<int64_t>> transfers;  // Peer -> SyncTransfer ints.
  for (size_t t = 0; t < plan->source.size(); ++t) {
    for (size_t b = 0; b < ballots.size(); ++b) {
      const int64_t from = plan->source[t][b];
      if (from < 0) continue;
      const int64_t to = ballots[b].peer;
      const int64_t hash = static_cast<int64_t>(plan->popular_hash[t]);
      transfers[from].insert(transfers[from].end(), {static_cast<int64_t>(t), to, 0, hash});
      transfers[to].insert(transfers[to].end(), {static_cast<int64_t>(t), from, 1, hash});
    }
  }
  const int64_t number = group.syncs++;
  for (const auto& [peer, entry] : sync.ballots) {
    std::vector<int64_t> extra = {number};
    const std::vector<int64_t>& mine = transfers[peer];
    extra.insert(extra.end(), mine.begin(), mine.end());
    Reply(peer, entry.first.request, absl::OkStatus(), static_cast<int64_t>(plan->revision), extra);
  }
  sync.planned = true;
}

absl::Status MasterState::HandleSyncDone(int64_t id, const Message& message) {
  if (message.ints.size() != 3) return absl::InvalidArgumentError("malformed shared-state done");
  const int64_t request = message.ints[0];
  const int64_t epoch = message.ints[1];
  const absl::Status reported = StatusFromWire(message.ints[2], message.text);
  Peer& peer = peers_.at(id);
  Group& group = groups_[peer.group];
  SyncRound& sync = group.sync;
  if (!peer.accepted || epoch != group.epoch || !sync.planned || sync.epoch != epoch ||
      !sync.ballots.count(id) || sync.done.count(id)) {
    Reply(id, request,
          absl::UnavailableError("the shared-state sync was abandoned (the peers changed): retry"),
          0);
    return absl::OkStatus();
  }
  if (!reported.ok() && sync.failure.ok()) {
    // Failed somewhere: everyone learns it now, not when the last peer gives up.
    sync.failure =
        absl::Status(reported.code(), absl::StrCat(Describe(id), ": ", reported.message()));
    for (const auto& [member, waiting] : sync.done) Reply(member, waiting, sync.failure, 0);
  }
  sync.done[id] = request;
  if (!sync.failure.ok()) {
    Reply(id, request, sync.failure, 0);
  } else if (sync.done.size() == group.ring.size()) {
    for (const auto& [member, waiting] : sync.done) {
      peers_.at(member).holds_group_state = true;
      Reply(member, waiting, absl::OkStatus(), 0);
    }
  }
  if (sync.done.size() == group.ring.size()) sync = SyncRound{};
  return absl::OkStatus();
}

void MasterState::Decide(const OpKey& key, OpVote& vote, absl::Status outcome) {
  vote.decided = true;
  vote.outcome = std::move(outcome);
  for (int64_t peer : vote.started) SendOutcome(peer, key, vote.outcome);
}

absl::Status MasterState::CheckEpoch(int64_t id, const OpKey& key) {
  const Peer& peer = peers_.at(id);
  if (!peer.accepted) {
    return absl::FailedPreconditionError("this peer has not been accepted into the group yet");
  }
  if (key.group != peer.group) {
    return absl::InvalidArgumentError(
        absl::StrCat("operation names peer group ", key.group, ", this peer is in ", peer.group));
  }
  const int64_t epoch = groups_[peer.group].epoch;
  if (key.epoch != epoch) {
    return absl::UnavailableError(absl::StrCat("epoch ", key.epoch, " of peer group ", key.group,
                                               " is over (now ", epoch,
                                               "): the peers changed; retry"));
  }
  return absl::OkStatus();
}

MasterState::OpVote* MasterState::VoteFor(int64_t id, const OpKey& key) {
  if (absl::Status status = CheckEpoch(id, key); !status.ok()) {
    SendOutcome(id, key, status);
    return nullptr;
  }
  return &groups_[key.group].ops[key];
}

absl::Status MasterState::HandleOpStart(int64_t id, const Message& message) {
  if (message.ints.size() < kOpKeyInts) return absl::InvalidArgumentError("malformed op start");
  const OpKey key = ReadOpKey(message.ints);
  OpVote* found = VoteFor(id, key);
  if (found == nullptr) return absl::OkStatus();
  OpVote& vote = *found;
  vote.started.insert(id);
  if (vote.decided) {
    SendOutcome(id, key, vote.outcome);
    return absl::OkStatus();
  }
  std::vector<int64_t> signature(message.ints.begin() + kOpKeyInts, message.ints.end());
  if (vote.first_peer < 0) {
    vote.signature = std::move(signature);
    vote.first_peer = id;
    vote.first_description = message.text;
    SettleUpdateRound();  // Members waiting in update_topology are needed here (last use of vote).
  } else if (signature != vote.signature) {
    Decide(
        key, vote,
        absl::FailedPreconditionError(absl::StrCat(
            "peers disagree on the operation with tag ", key.tag, ": ", Describe(vote.first_peer),
            " runs ", vote.first_description, ", ", Describe(id), " runs ", message.text,
            ArenaTurnsWanted(signature) != ArenaTurnsWanted(vote.signature)
                ? " (and not both in shared memory)"
                : "")));
  }
  Group& group = groups_[key.group];
  // Every member started it, so none waits in the arena for one that may never come: its turn.
  const int64_t turns = ArenaTurnsWanted(vote.signature);
  if (!vote.decided && vote.turn < 0 && turns > 0 && vote.started.size() == group.ring.size()) {
    vote.turn = group.arena_turns;
    group.arena_turns += turns;
    for (int64_t peer : vote.started) {
      Message turn{MessageType::kOpTurn, {}, ""};
      AppendOpKey(key, turn.ints);
      turn.ints.push_back(vote.turn);
      outgoing_.push_back({peer, std::move(turn)});
    }
  }
  return absl::OkStatus();
}

absl::Status MasterState::HandleOpDone(int64_t id, const Message& message) {
  if (message.ints.size() != kOpKeyInts + 1) return absl::InvalidArgumentError("malformed op done");
  const OpKey key = ReadOpKey(message.ints);
  OpVote* found = VoteFor(id, key);
  if (found == nullptr) return absl::OkStatus();
  OpVote& vote = *found;
  Group& group = groups_[key.group];
  vote.done.insert(id);
  if (!vote.started.count(id)) {
    vote.started.insert(id);
    if (vote.decided) SendOutcome(id, key, vote.outcome);
  }
  const absl::Status reported = StatusFromWire(message.ints[kOpKeyInts], message.text);
  if (!vote.decided && !reported.ok()) {
    std::string absent;
    if (reported.code() == absl::StatusCode::kDeadlineExceeded &&
        vote.started.size() < group.ring.size()) {
      absent = absl::StrCat("; never started it: ", Missing(group.ring, vote.started));
    }
    Decide(key, vote,
           absl::Status(reported.code(),
                        absl::StrCat(Describe(id), ": ", reported.message(), absent)));
  }
  if (!vote.decided && vote.done.size() == group.ring.size()) {
    Decide(key, vote, absl::OkStatus());
  }
  if (vote.decided && vote.done.size() == group.ring.size()) group.ops.erase(key);
  return absl::OkStatus();
}

std::vector<MasterState::Outgoing> MasterState::TakeOutgoing() {
  std::vector<Outgoing> out;
  out.swap(outgoing_);
  return out;
}

}  // namespace plexus::elastic
