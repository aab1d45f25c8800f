// GlooTransport: the Transport interface over a Gloo context's unbound buffers, so every
// schedule in algorithms/ runs on Gloo's TCP pairs (reduce_scatter, uneven all_to_all, and the
// dtypes and ops Gloo cannot reduce itself).
//
// Gloo has no per-operation cancel: a receive it has accepted stays registered until data
// arrives. So the first failure of any operation (abort, timeout, lost peer) breaks the whole
// transport: every pending operation fails at once with that status, and later ones are
// refused, as c10d's Gloo process group does after an error. Completion is driven by waiting:
// a Work completes inside Wait() (Gloo's own waitSend/waitRecv) or when the transport breaks.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "frontend/transport/transport.h"
#include "gloo/context.h"

namespace plexus {

// Gloo slot prefixes 0x01-0x08 belong to its own collectives; ours carry this one.
inline constexpr uint64_t kGlooTransportSlotPrefix = uint64_t{0xA7} << 56;

// The Gloo slot of a plexus message tag: its step, the low 31 bits of its operation, and
// whether the operation is point-to-point, under the prefix above.
uint64_t GlooSlot(uint64_t tag);

// Maps an exception thrown by Gloo to a status: timeouts to DeadlineExceeded, connection
// errors to Unavailable, anything else to Internal. `what` names the operation.
absl::Status GlooErrorToStatus(const std::exception& error, const std::string& what);

class GlooTransport : public Transport {
 public:
  explicit GlooTransport(std::shared_ptr<gloo::Context> context);
  ~GlooTransport() override;

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
               absl::Duration timeout) override;
  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  void AbortOperation(uint64_t operation, absl::Status reason) override;
  void Abort(absl::Status reason) override;

  // The Gloo context, for the backend's native collectives (which share its pairs).
  const std::shared_ptr<gloo::Context>& context() const { return context_; }
  // Why the transport broke; OK while it is usable.
  absl::Status broken();

  struct Pending;  // One posted send or receive (gloo_transport.cc).

 private:
  WorkPtr Post(bool is_send, int peer, MessageTag tag, uint8_t* data, size_t size,
               absl::Duration timeout, std::vector<int> any_of);
  // Waits for `pending` within `timeout` (and its own deadline) on the calling thread.
  void WaitFor(const std::shared_ptr<Pending>& pending, absl::Duration timeout);
  void Break(const absl::Status& reason);

  const std::shared_ptr<gloo::Context> context_;
  std::mutex mu_;
  absl::Status broken_;
  // Operations not yet complete. Buffers of failed ones stay here until the transport goes,
  // since Gloo may still hold them.
  std::list<std::shared_ptr<Pending>> pending_;
};

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_
