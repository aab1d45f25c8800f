// The event loop behind TcpTransport: owns every peer socket, reads and writes frames
// (tcp_frame.h), and hands arriving messages to its ReceiveMatcher, which pairs them with
// receives. TcpTransport serialises every call with one lock (the poller holds it except while
// in epoll_wait); only the send lanes are shared beyond it. The loop never completes a Work
// itself: it lists the Works it finished (TakeFinished), which the transport completes once
// that lock is released.
#ifndef PLEXUS_BACKENDS_TCP_TCP_LOOP_H_
#define PLEXUS_BACKENDS_TCP_TCP_LOOP_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/tcp/peer_liveness.h"
#include "backends/tcp/receive_matcher.h"
#include "backends/tcp/recent_operations.h"
#include "backends/tcp/send_lane.h"
#include "backends/tcp/shm_link.h"
#include "backends/tcp/tcp_frame.h"
#include "base/net/socket_util.h"
#include "base/transport/transport.h"

namespace plexus::tcp {

// Milliseconds until `deadline` for epoll_wait: rounded up, clamped to [0, 1000].
int MillisecondsUntil(absl::Time deadline, absl::Time now);

class Loop {
 public:
  using SignatureDescriber = std::function<std::string(uint64_t signature)>;
  // A Work the loop finished, with the status to complete it with.
  struct Finished {
    WorkPtr work;
    absl::Status status;
  };

  // `rings` (may be null) links the peers on this host; the loop owns it. `heartbeat`:
  // silence after which a peer is lost (InfiniteDuration: never).
  // An encrypted peer's frames all go through the loop (one thread per TLS session); a peer on
  // this host drops its cipher: its frames travel through rings, its socket carries doorbells.
  Loop(int rank, std::vector<Connection> peers, std::unique_ptr<ShmLinks> rings,
       std::vector<SendLane*> lanes, int epoll_fd, uint64_t max_message_bytes,
       uint64_t max_unexpected_bytes, absl::Duration heartbeat, SignatureDescriber describe);
  // Fails what is pending and completes every Work still listed: destroy it unlocked.
  ~Loop();

  void PostSend(const OpPtr& op);
  void PostRecv(const OpPtr& op);
  // Fails the operation's pending work here; with `notify_peers`, tells every peer to do so.
  void AbortOperation(uint64_t operation, const absl::Status& reason, bool notify_peers);
  void AbortAll(const absl::Status& reason);
  // Peers lost (not departed with a goodbye), in rank order.
  std::vector<int> LostPeers() const { return liveness_.LostPeers(); }
  // Queues a goodbye to every peer; Drained() says when they have been written.
  void SayGoodbye();
  bool Drained() const;
  // Aborted as a whole (AbortAll): every operation failed, nothing left worth delivering.
  bool broken() const { return !broken_.ok(); }

  void OnEvent(int peer, uint32_t events);
  // Reads what `peer`'s socket holds right now without asking epoll first: a caller waiting
  // on that peer saves a system call when the bytes are already there. Peers on rings are
  // left to PollRings (reading a ring costs no system call). Whether any bytes came.
  bool ReadNow(int peer);

  // Fails operations past their deadline by `now`; beats and looks for silent peers when due.
  void ExpireDeadlines(absl::Time now);
  // Milliseconds from `now` to the next deadline or heartbeat, for epoll_wait.
  int NextTimeoutMs(absl::Time now) const;

  // Shared-memory peers send no readiness events while nobody sleeps: every poll round reads
  // their rings and refills the ones that had no room.
  // Returns how many rings had bytes.
  int PollRings();
  // Before the poller sleeps: raises every ring's asleep flag so writers ring the doorbell.
  // False (nothing raised) if bytes are already waiting. Awake() lowers the flags.
  bool PrepareToSleep();
  void Awake();
  int shm_peers() const { return rings_ != nullptr ? rings_->linked : 0; }
  SharedArena* arena() const { return rings_ != nullptr ? rings_->arena.get() : nullptr; }

  // The Works finished since the last call, in the order they finished, appended to `out`.
  bool HasFinished() const { return !finished_.empty(); }
  void TakeFinished(std::vector<Finished>& out);

 private:
  struct Peer {
    ScopedFd fd;
    std::unique_ptr<StreamCipher> cipher;  // TLS; null in the clear.
    // A TLS record sealed but only partly sent: it goes out before anything else.
    bool CipherPending() const { return cipher != nullptr && cipher->HasPendingOutput(); }
    SendLane* lane = nullptr;
    ShmRing* in = nullptr;  // Set for a peer on this host: frames arrive here, not on fd.
    ShmRing* out = nullptr;
    bool closed = false;  // Its socket reached end of file; the ring may still hold frames.
    bool want_write = false;
    std::deque<OpPtr> tx;
    std::vector<uint8_t> rx;  // Small reads land here; large payloads bypass it.
    size_t rx_begin = 0;
    size_t rx_end = 0;
    bool in_payload = false;
    FrameType type = FrameType::kData;
    uint64_t tag = 0;
    uint64_t signature = 0;
    uint64_t payload_left = 0;
    uint8_t* target = nullptr;  // nullptr: discard the payload.
    OpPtr rx_op;
    StagedPtr rx_staged;  // The staged message its payload goes to.
    std::string abort_text;
  };

  void Flush(int peer);
  // Queues a frame the loop itself sends (heartbeat, goodbye, abort), with a copy of `text`
  // as its payload; `what` names its Work.
  void QueueFrame(int peer, FrameType type, const char* what, uint64_t tag = 0,
                  uint64_t signature = 0, absl::string_view text = {});
  // Moves the frames handed to `peer`'s lane into its queue, in order, starting the write.
  void AdoptHanded(int peer);
  // Marks an op the loop dropped or finished writing as no longer queued.
  void Dequeued(const Op& op);
  // Stops direct writes to `peer` (or to every peer).
  void CloseLane(int peer);
  void OnReadable(int peer);
  uint64_t socket_reads_ = 0;  // recv() calls on sockets that returned bytes.
  // recv() on the peer's stream (its socket, or its ring: 0 only once closed and empty).
  ssize_t ReadStream(int peer_index, void* buffer, size_t size);
  // Why a read failed (errno set by ReadStream).
  static std::string ReadFailure(const Peer& peer);
  // Reads and drops the doorbell bytes on a ring peer's socket; notes end of file.
  void DrainDoorbells(int peer);
  // Consumes buffered bytes; false if the peer was dropped.
  bool ProcessBuffered(int peer);
  bool StartFrame(int peer, const char* header);
  // A data frame's payload goes to the receive waiting for it, else to staging; false if the
  // peer was dropped.
  bool StartDataFrame(int peer, uint64_t size);
  void FinishFrame(int peer);
  // Completes `op` with a staged message (already unstaged) and recycles its buffer.
  void Deliver(const OpPtr& op, const StagedPtr& staged);
  // Checks a matched receive against the arriving message; fails it on disagreement.
  bool Matches(const OpPtr& op, int peer, uint64_t size, uint64_t signature);
  // Remembers the signature this rank uses for an operation, and checks it against messages
  // that already arrived for it. False (and the operation aborted everywhere) on disagreement.
  bool RecordSignature(const Op& op);
  // Aborts `operation` everywhere because `peer` sent `theirs` while this rank runs `ours`.
  void Mismatch(uint64_t operation, int peer, uint64_t theirs, uint64_t ours);
  void PeerLost(int peer, const std::string& reason);
  void PeerDeparted(int peer);
  // Fails every pending operation with `status`; returns how many there were.
  int FailEverything(const absl::Status& status);
  // Ends waits in the shared-memory arena: a peer is gone or the transport was aborted.
  void BreakArena(const absl::Status& status);
  // Drops the peers liveness_ finds silent past the interval and beats to the idle ones due.
  void CheckHeartbeats(absl::Time now);
  void Finish(const OpPtr& op, const absl::Status& status);
  // Before failing a pending op early: stop using the caller's buffer (copy a half-written
  // send, send the rest of a half-read receive to nowhere).
  void ReleaseCallerBuffer(const OpPtr& op);
  void Arm(const OpPtr& op);
  void SetWantWrite(int peer, bool want);
  // Status an operation fails with right away, if any (broken transport, aborted operation).
  absl::Status Refusal(const Op& op) const;
  std::string Describe(const Op& op) const;

  const int rank_;
  const int epoll_fd_;
  const std::unique_ptr<ShmLinks> rings_;
  const uint64_t max_message_bytes_;
  std::vector<Peer> peers_;
  PeerLiveness liveness_;  // Alive, departed or lost, per peer; the heartbeat clock.
  ReceiveMatcher receives_;
  std::multimap<absl::Time, OpPtr> timers_;
  RecentOperations<absl::Status> aborted_;  // Why each aborted operation was.
  absl::Status broken_;
  const SignatureDescriber describe_;
  RecentOperations<uint64_t> signatures_;  // The signature this rank runs each operation with.
  std::vector<Finished> finished_;         // Not yet completed: see TakeFinished.
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_TCP_LOOP_H_
