// GlooTransport: the Transport interface over a Gloo context's unbound buffers, so every
// schedule in algorithms/ runs on Gloo's TCP pairs (reduce_scatter, uneven all_to_all, and the
// dtypes and ops Gloo cannot reduce itself).
//
// Gloo has no per-operation cancel: a receive it has accepted stays registered until data
// arrives. So the first failure of any operation (abort, timeout, lost peer) breaks the whole
// transport: every pending operation fails at once with that status, and later ones are
// refused, as c10d's Gloo process group does after an error. Gloo has no completion callback:
// a Work completes inside Wait() (Gloo's own waitSend/waitRecv), or on the transport's
// completer thread, which waits for the operations nobody waits for in the order they were
// posted (so OnComplete callbacks fire without a Wait), or when the transport breaks.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"
#include "base/store/store.h"
#include "base/transport/transport.h"
#include "gloo/context.h"

namespace plexus::gloo_backend {

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
  // Connects `size` ranks' Gloo TCP pairs through `store`, this rank listening on `address`,
  // within `timeout`: how a gloo group forms. `group` names it in errors. A try that fails on
  // any rank (a dial reset under load) is retried by every rank, up to 3 tries in all.
  static absl::StatusOr<std::shared_ptr<GlooTransport>> Connect(std::shared_ptr<Store> store,
                                                                int rank, int size,
                                                                const std::string& address,
                                                                absl::Duration timeout,
                                                                const std::string& group);
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
  // Waits for `pending` within `timeout` (and its own deadline) on the calling thread. Returns
  // at once if another thread is waiting for it, unless `queue_behind_waiter`.
  void WaitFor(const std::shared_ptr<Pending>& pending, absl::Duration timeout,
               bool queue_behind_waiter = false);
  void Break(const absl::Status& reason);
  // The completer thread: waits for each posted operation in turn, within its deadline.
  void Complete();

  const std::shared_ptr<gloo::Context> context_;
  Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  // Operations not yet complete. Buffers of failed ones stay here until the transport goes,
  // since Gloo may still hold them.
  std::list<std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<std::weak_ptr<Pending>> to_complete_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable posted_;
  std::thread completer_;
};

}  // namespace plexus::gloo_backend

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_TRANSPORT_H_
