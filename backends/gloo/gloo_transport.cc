#include "backends/gloo/gloo_transport.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/gloo/gloo_store_adapter.h"
#include "base/core/mutex.h"
#include "base/store/attempt_together.h"
#include "base/work/callback_runner.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace plexus::gloo_backend {

struct GlooTransport::Pending {
  bool is_send = false;
  std::string what;  // "recv of 4096 bytes from rank 1 (tag ...)"
  size_t size = 0;
  absl::Time deadline;
  WorkPtr work;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  Mutex wait_mu;  // One thread at a time waits on the buffer (Gloo requires it).
};

uint64_t GlooSlot(uint64_t tag) {
  const uint64_t operation = TagOperation(tag);
  const uint64_t step = tag & ((uint64_t{1} << kTagStepBits) - 1);
  const uint64_t point_to_point = operation >= (uint64_t{1} << 39) ? uint64_t{1} << 55 : 0;
  return kGlooTransportSlotPrefix | point_to_point | ((operation & 0x7fffffff) << kTagStepBits) |
         step;
}

absl::Status GlooErrorToStatus(const std::exception& error, const std::string& what) {
  const std::string message = error.what();
  const std::string text = absl::StrCat(what, ": ", message);
  if (absl::StrContains(message, "Timed out") || absl::StrContains(message, "timed out")) {
    return absl::DeadlineExceededError(text);
  }
  if (dynamic_cast<const gloo::IoException*>(&error) != nullptr) {
    return absl::UnavailableError(text);
  }
  return absl::InternalError(text);
}

namespace {

// Tries every rank makes at forming the mesh together (AttemptTogether).
constexpr int kConnectTries = 3;

void IgnoreSigpipeUnlessHandled() {
  struct sigaction current = {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<GlooTransport>> GlooTransport::Connect(std::shared_ptr<Store> store,
                                                                      int rank, int size,
                                                                      const std::string& address,
                                                                      absl::Duration timeout,
                                                                      const std::string& group) {
  // Gloo writes to its sockets without MSG_NOSIGNAL: a write to a dead peer would kill this
  // process with SIGPIPE instead of failing the operation.
  IgnoreSigpipeUnlessHandled();
  const std::string what =
      absl::StrCat("gloo: connecting rank ", rank, " of ", size, " (group ", group,
                   ", listening at ", address, "; peers dial the addresses they advertised)");
  // Debian's Gloo dials each peer once: under load a dial can meet a reset, which fails the
  // pairs on both ends while the other ranks' meshes form. Every rank then starts over.
  std::shared_ptr<gloo::rendezvous::Context> connected;
  AttemptTogetherOptions options{.rank = rank,
                                 .size = size,
                                 .max_tries = kConnectTries,
                                 .deadline = absl::Now() + timeout,
                                 .what = what};
  absl::Status status =
      AttemptTogether(store, options, [&](std::shared_ptr<Store> try_store, int) -> absl::Status {
        connected.reset();
        try {
          gloo::transport::tcp::attr attr;
          attr.hostname = address;
          std::shared_ptr<gloo::transport::Device> device =
              gloo::transport::tcp::CreateDevice(attr);
          auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
          // A later try has what is left of the one deadline, for Gloo and its store waits alike.
          const absl::Duration left =
              std::max(options.deadline - absl::Now(), absl::Milliseconds(1));
          context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(left)));
          ConnectFullMesh(*context, std::make_shared<GlooStoreAdapter>(std::move(try_store), left),
                          device);
          connected = std::move(context);
          return absl::OkStatus();
        } catch (const std::exception& error) {
          return GlooErrorToStatus(error, what);
        }
      });
  if (!status.ok()) return status;
  return std::make_shared<GlooTransport>(std::move(connected));
}

GlooTransport::GlooTransport(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)) {
  completer_ = std::thread([this] { Complete(); });
}

GlooTransport::~GlooTransport() {
  Break(absl::AbortedError("transport destroyed"));
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  posted_.notify_all();
  completer_.join();
  // Gloo's pairs go with the context (after the buffers, which the pairs may reference).
  MutexLock lock(mu_);
  pending_.clear();
}

WorkPtr GlooTransport::Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                            absl::Duration timeout) {
  return Post(true, peer, tag, const_cast<uint8_t*>(data.data()), data.size(), timeout, {});
}

WorkPtr GlooTransport::Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                            absl::Duration timeout) {
  return Post(false, peer, tag, data.data(), data.size(), timeout, {});
}

WorkPtr GlooTransport::RecvFromAny(MessageTag tag, absl::Span<uint8_t> data,
                                   absl::Duration timeout) {
  std::vector<int> everyone;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) everyone.push_back(r);
  }
  return Post(false, -1, tag, data.data(), data.size(), timeout, std::move(everyone));
}

WorkPtr GlooTransport::Post(bool is_send, int peer, MessageTag tag, uint8_t* data, size_t size,
                            absl::Duration timeout, std::vector<int> any_of) {
  auto pending = std::make_shared<Pending>();
  pending->is_send = is_send;
  pending->size = size;
  pending->deadline = absl::Now() + timeout;
  pending->what =
      absl::StrCat(is_send ? "send of " : "recv of ", size, " bytes ", is_send ? "to" : "from",
                   peer >= 0 ? absl::StrCat(" rank ", peer) : " any rank", " (operation ",
                   TagOperation(tag.tag), ")");
  pending->work = std::make_shared<Work>(is_send ? "send" : "recv", context_->size);
  const WorkPtr work = pending->work;
  {
    MutexLock lock(mu_);
    if (!broken_.ok()) {
      work->Complete(broken_);
      return work;
    }
    if (peer == rank() || (peer < 0 && any_of.empty())) {
      work->Complete(absl::InvalidArgumentError(
          absl::StrCat(pending->what, ": no such peer for rank ", rank())));
      return work;
    }
    try {
      // Gloo wants a non-null pointer even for empty messages.
      static uint8_t empty_target;
      pending->buffer = context_->createUnboundBuffer(size > 0 ? data : &empty_target, size);
      const uint64_t slot = GlooSlot(tag.tag);
      if (is_send) {
        pending->buffer->send(peer, slot);
      } else if (peer >= 0) {
        pending->buffer->recv(peer, slot);
      } else {
        pending->buffer->recv(any_of, slot);
      }
    } catch (const std::exception& error) {
      absl::Status status = GlooErrorToStatus(error, pending->what);
      work->Complete(status);
      broken_ = status;
      return work;
    }
    pending_.push_back(pending);
    to_complete_.push_back(pending);
  }
  posted_.notify_one();
  std::weak_ptr<Pending> weak = pending;
  work->SetWaitHook([this, weak](absl::Duration wait_timeout) {
    if (std::shared_ptr<Pending> p = weak.lock()) WaitFor(p, wait_timeout);
  });
  return work;
}

void GlooTransport::WaitFor(const std::shared_ptr<Pending>& pending, absl::Duration timeout,
                            bool queue_behind_waiter) {
  if (queue_behind_waiter) {
    pending->wait_mu.lock();
  } else if (!pending->wait_mu.try_lock()) {
    return;  // Someone else waits.
  }
  UniqueLock waiting(pending->wait_mu, std::adopt_lock);
  if (pending->work->IsCompleted()) return;
  const absl::Duration left = pending->deadline - absl::Now();
  // A Gloo wait that times out closes every pair of the context, so only the operation's own
  // deadline may be handed to Gloo; a shorter wait returns without touching it.
  if (timeout < left) return;
  const auto gloo_timeout = std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
  absl::Status status;
  try {
    int source = -1;
    const bool done = pending->is_send ? pending->buffer->waitSend(&source, gloo_timeout)
                                       : pending->buffer->waitRecv(&source, gloo_timeout);
    if (!done) return;  // Aborted by Break(), which completed the Work.
    if (pending->is_send) {
      pending->work->AddBytesSent(static_cast<int64_t>(pending->size));
    } else {
      pending->work->SetSourceRank(source);
      pending->work->AddBytesReceived(static_cast<int64_t>(pending->size));
    }
  } catch (const std::exception& error) {
    status = GlooErrorToStatus(error, pending->what);
  }
  if (!status.ok()) {
    Break(status);
    return;
  }
  pending->work->Complete(absl::OkStatus());
  MutexLock lock(mu_);
  pending_.remove(pending);
}

void GlooTransport::Complete() {
  ProgressScope progress;  // The completions of every pending operation wait on this thread.
  while (true) {
    std::shared_ptr<Pending> next;
    {
      UniqueLock lock(mu_);
      posted_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !to_complete_.empty();
      });
      if (stopping_) return;
      next = to_complete_.front().lock();
      to_complete_.pop_front();
    }
    // Gloo is handed only the operation's own deadline (a shorter Gloo wait would close the
    // context). If a caller is waiting for it already, this waits its turn behind the caller.
    if (next != nullptr && !next->work->IsCompleted()) {
      WaitFor(next, absl::InfiniteDuration(), /*queue_behind_waiter=*/true);
    }
  }
}

void GlooTransport::AbortOperation(uint64_t operation, absl::Status reason) {
  // Gloo cannot withdraw the operation's posted buffers: the transport breaks instead.
  Break(absl::Status(reason.code(), absl::StrCat("operation ", operation, ": ", reason.message())));
}

void GlooTransport::Abort(absl::Status reason) { Break(reason); }

absl::Status GlooTransport::broken() {
  MutexLock lock(mu_);
  return broken_;
}

void GlooTransport::Break(const absl::Status& reason) {
  std::vector<std::shared_ptr<Pending>> failed;
  absl::Status status;
  bool first = false;
  {
    MutexLock lock(mu_);
    if (broken_.ok()) {
      broken_ = reason;
      first = true;
    }
    status = broken_;
    for (const auto& pending : pending_) {
      if (!pending->work->IsCompleted()) failed.push_back(pending);
    }
  }
  if (first) {
    // Closing every connection tells the peers at once (they see a closed connection), as the
    // tcp backend's abort frames do; the context is unusable afterwards anyway.
    try {
      context_->closeConnections();
    } catch (const std::exception&) {
      // Already closing.
    }
  }
  for (const auto& pending : failed) {
    pending->work->Complete(status);
    if (pending->is_send) {
      pending->buffer->abortWaitSend();
    } else {
      pending->buffer->abortWaitRecv();
    }
  }
}

}  // namespace plexus::gloo_backend
