// MasterState: the elastic master's decisions, without sockets. MasterNode feeds it the messages
// of connected peers and the losses it detects, and sends what it queues.
//
// Membership: a peer that says hello is pending until the accepted peers agree to take it in
// (an update-topology round that all of them reach); the first peer of an empty master is
// accepted at once. Each peer group has an epoch, bumped whenever its membership or ring order
// changes; a loss or leave bumps it at once.
//
// Update-topology: a call returns at once when nobody is pending. Otherwise the caller waits,
// and when every accepted peer waits in update_topology the pending peers are accepted and all
// of them return. The master agrees on states, not on call counts: a waiting peer that another
// peer of its group needs - in a shared-state sync, a topology optimisation or an all-reduce the
// waiting peer has not joined - is let go without accepting anyone ("no change"), so it can
// join that collective; the round completes at a later call. So peers that made different
// numbers of topology calls, retries or failed operations never wait on each other across two
// different collectives, and a newcomer may enter with sync_shared_state (PCCL's loop) or with
// update_topology / are_peers_pending (which return "no change" / "no" while nobody else is
// pending). are_peers_pending answers whether anyone is pending now.
//
// Deadlines: a peer's update_topology, shared-state ballot and optimize_topology start carry its
// timeout; Expire() answers each one still waiting past it with DeadlineExceeded naming the
// peers it waited for and what each is doing, and forgets it, so the group stays usable.
//
// Operations: every all-reduce is voted on. Peers announce (OpStart) what they run under an
// OpKey and report (OpDone) how their part ended; the master decides once - success only when
// every member of the epoch reported success with the same signature, failure as soon as one
// reports failure, the signatures disagree, or the epoch ends - and tells each participant. So
// an operation either succeeded on every peer of its epoch or failed on every one.
#ifndef PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_
#define PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

class MasterState {
 public:
  struct Outgoing {
    int64_t peer;
    Message message;
  };

  MasterState(int64_t store_port, absl::Duration heartbeat_timeout);

  // A connection said hello for `group`: returns its peer id and queues the welcome.
  int64_t Join(int64_t group, const std::string& address);
  // Any message after the hello. A protocol violation returns an error (drop the peer).
  absl::Status Handle(int64_t peer, const Message& message);
  // Answers the requests that waited past their deadline (DeadlineExceeded).
  void Expire(absl::Time now);
  // When Expire next has something to answer (InfiniteFuture: nothing waits with a deadline).
  absl::Time NextExpiry() const;
  // The peer is gone (connection lost, silent, or left); `reason` reaches the survivors.
  void Drop(int64_t peer, const std::string& reason);

  std::vector<Outgoing> TakeOutgoing();

  int64_t accepted_count() const;
  int64_t pending_count() const;
  std::string Describe(int64_t peer) const;
  // Entries of per-call state the master holds (waiting requests, votes, ballots): bounded by
  // the peers and their operations in flight, whatever the number of calls made.
  size_t HeldEntries() const;

 private:
  struct Peer {
    int64_t group = 0;
    std::string address;
    bool accepted = false;
    bool holds_group_state = false;  // A sync of its group completed with it.
    int64_t waiting_request = -1;    // Its update_topology request, while it waits.
    absl::Time waiting_since;
    absl::Time waiting_expires;
  };
  struct Waiting {  // A request parked until its collective forms.
    int64_t request = -1;
    absl::Time expires;
  };
  struct OpVote {
    std::vector<int64_t> signature;
    int64_t first_peer = -1;
    std::string first_description;
    std::set<int64_t> started;
    std::set<int64_t> done;
    bool decided = false;
    absl::Status outcome;
    int64_t turn = -1;  // Its shared-memory turn, once every member started it (kOpTurn).
  };
  // One sync_shared_state of a group: ballots until every member voted, then the plan is out
  // and the members report how their transfers went.
  struct SyncRound {
    int64_t epoch = -1;
    std::map<int64_t, std::pair<Waiting, SyncBallot>> ballots;  // Peer -> (request, ballot).
    bool planned = false;
    std::map<int64_t, int64_t> done;  // Peer -> its kSyncDone request (waiting for the end).
    absl::Status failure;             // The first failure reported after the plan.
  };
  // One optimize_topology of a group: every member arrives, then all measure their links and
  // report what they received at; the master then picks the ring.
  struct OptimizeRound {
    int64_t epoch = -1;
    std::map<int64_t, Waiting> started;  // Peer -> request.
    bool measuring = false;
    std::map<int64_t, std::pair<int64_t, std::vector<int64_t>>> reports;  // Peer -> (request, row).
    absl::Status failure;
  };
  struct Group {
    int64_t epoch = 0;
    std::vector<int64_t> ring;
    absl::flat_hash_map<OpKey, OpVote> ops;
    SyncRound sync;
    int64_t syncs = 0;  // Planned syncs so far: names the transfers of each on the wire.
    OptimizeRound optimize;
    int64_t optimizations = 0;
    int64_t arena_turns = 0;  // Shared-memory turns handed out in this epoch.
  };

  absl::Status HandleUpdateTopology(int64_t peer, const Message& message);
  // Accepts the pending peers if every accepted peer waits in update_topology; else lets go the
  // waiting peers a collective of their group needs (or all of them when nobody is pending).
  void SettleUpdateRound();
  // Whether a collective of `peer`'s group waits for it: a sync, optimisation or undecided
  // all-reduce another member entered and it did not.
  bool NeededElsewhere(int64_t peer) const;
  // What `peer` is doing as the master sees it ("in sync_shared_state", ...).
  std::string Activity(int64_t peer) const;
  // "peer 3 (addr, group 0) (in ...), peer 5 (...)" for the members of `among` not in `arrived`.
  std::string Missing(const std::vector<int64_t>& among, const std::set<int64_t>& arrived) const;
  void AcceptPending();
  // Bumps the group's epoch; every undecided operation of the old one fails with `reason`, and
  // so do the group's shared-state sync and topology optimisation in progress. What that tells
  // peers is held back until FlushDeferredOutcomes (after the new topology is pushed).
  void NewEpoch(int64_t group, const absl::Status& reason);
  void FlushDeferredOutcomes();
  void PushTopologies();
  void Decide(const OpKey& key, OpVote& vote, absl::Status outcome);
  void SendOutcome(int64_t peer, const OpKey& key, const absl::Status& outcome);
  void Reply(int64_t peer, int64_t request, const absl::Status& status, int64_t value,
             const std::vector<int64_t>& extra = {});
  absl::Status HandleSyncState(int64_t peer, const Message& message);
  absl::Status HandleSyncDone(int64_t peer, const Message& message);
  void PlanGroupSync(int64_t group);
  absl::Status HandleOptimizeStart(int64_t peer, const Message& message);
  absl::Status HandleOptimizeReport(int64_t peer, const Message& message);
  void FinishOptimize(int64_t group);
  // The request's epoch check shared by sync and optimize: false (and the reply sent) when the
  // peer is not accepted or names an epoch that is over.
  bool RequestInCurrentEpoch(int64_t peer, int64_t request, int64_t epoch);
  // Fail every request waiting in the group's sync / optimisation with `reason`, start afresh.
  void AbandonSync(Group& group, const absl::Status& reason);
  void AbandonOptimize(Group& group, const absl::Status& reason);
  absl::Status HandleOpStart(int64_t peer, const Message& message);
  absl::Status HandleOpDone(int64_t peer, const Message& message);
  // The group's current epoch if `key` names it; else the status the op must fail with.
  absl::Status CheckEpoch(int64_t peer, const OpKey& key);
  // The vote of `key`, or null after telling the peer its epoch is over.
  OpVote* VoteFor(int64_t peer, const OpKey& key);

  const int64_t store_port_;
  const absl::Duration heartbeat_timeout_;
  int64_t next_peer_ = 1;
  std::map<int64_t, Peer> peers_;
  std::map<int64_t, Group> groups_;
  std::vector<Outgoing> outgoing_;
  // While NewEpoch runs, outcomes and replies go to deferred_ instead of outgoing_.
  bool deferring_ = false;
  std::vector<Outgoing> deferred_;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_
