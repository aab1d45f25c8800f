// Transport: tagged, asynchronous point-to-point byte movement between the ranks of a group.
//
// The algorithms library is written against this interface only; each backend supplies an
// implementation (TCP sockets, Gloo unbound buffers, MPI point-to-point). Contract:
//  - Send/Recv return at once with a Work that completes when the bytes have left the buffer
//    (send) or arrived in it (recv). Buffers must stay valid until then.
//  - Messages from one sender to one receiver with the same tag are matched in send order.
//    A receive's size must equal the matched message's size; otherwise the receive fails with
//    InvalidArgument naming both sizes, and no byte outside the buffer is written.
//  - A lost peer completes every pending operation involving it with Unavailable; a deadline
//    completes an operation with DeadlineExceeded; Abort() completes every pending operation
//    with the given status (Aborted by convention) and makes later calls fail the same way.
//  - Thread-safe: any thread may call any method.
#ifndef PLEXUS_FRONTEND_TRANSPORT_TRANSPORT_H_
#define PLEXUS_FRONTEND_TRANSPORT_TRANSPORT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "frontend/work/work.h"

namespace plexus {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `data` to `peer` under `tag`; the Work fails if not delivered by `timeout`.
  virtual WorkPtr Send(int peer, uint64_t tag, absl::Span<const uint8_t> data,
                       absl::Duration timeout) = 0;

  // Receives the next message from `peer` under `tag` into `data`.
  virtual WorkPtr Recv(int peer, uint64_t tag, absl::Span<uint8_t> data,
                       absl::Duration timeout) = 0;

  // Receives the next message under `tag` from whichever peer sends first; the Work's
  // source_rank() names it once complete.
  virtual WorkPtr RecvFromAny(uint64_t tag, absl::Span<uint8_t> data,
                              absl::Duration timeout) = 0;

  // Fails every pending and future operation with `reason`.
  virtual void Abort(absl::Status reason) = 0;
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_TRANSPORT_TRANSPORT_H_
