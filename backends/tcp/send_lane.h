// How frames leave for one peer. A caller's thread may write a frame straight to the peer's
// socket (or shared-memory ring) when nothing is queued ahead of it, saving a wake-up of the
// loop thread; otherwise the frame is handed to the loop, which writes it when the peer can take
// it. The loop and the callers share one SendLane per peer.
#ifndef PLEXUS_BACKENDS_TCP_SEND_LANE_H_
#define PLEXUS_BACKENDS_TCP_SEND_LANE_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>

#include "backends/tcp/shm_ring.h"
#include "backends/tcp/tcp_frame.h"
#include "base/core/mutex.h"
#include "base/net/socket_util.h"

namespace plexus::tcp {

// Frames reach the loop through `handed`, in the order their senders took the lane: a frame a
// caller wrote partly is ahead of every frame handed after it, whichever thread's post the loop
// runs first (else a later frame could be written into the middle of it).
struct SendLane {
  Mutex mu;
  int fd ABSL_GUARDED_BY(mu) = -1;  // -1: no direct writes (peer gone, transport broken).
  // Frames go here when the peer shares this host; fd is its doorbell.
  ShmRing* ring ABSL_GUARDED_BY(mu) = nullptr;
  int64_t queued ABSL_GUARDED_BY(mu) = 0;  // Frames handed to the loop, not yet written or dropped.
  // Handed over, not yet in the loop's queue.
  std::deque<std::shared_ptr<Op>> handed ABSL_GUARDED_BY(mu);
};

// Writes `op`'s frame on the calling thread if the lane is idle. True when the whole frame was
// written (the caller finishes the op); false when the op must go to the loop, in which case it
// has been counted in `lane.queued`, appended to `lane.handed`, and `op.written` says how much
// already left.
bool TrySendDirect(SendLane& lane, const OpPtr& op);

// Sends one doorbell byte on a ring peer's socket.
void RingDoorbell(int fd);

// Writes what remains of `op`'s frame to a socket (through `cipher` when it is encrypted), or to
// `ring` (then `fd` is its doorbell); returns the bytes written, or -1 with errno set (EAGAIN
// when there is no room).
ssize_t WriteFrame(int fd, ShmRing* ring, StreamCipher* cipher, Op& op);

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_SEND_LANE_H_
