#include "backends/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/tcp/tcp_connect.h"
#include "backends/tcp/tcp_loop.h"
#include "backends/tcp/wait_policy.h"
#include "base/auth/mutual_auth.h"
#include "base/core/deadline.h"
#include "base/core/heartbeat.h"
#include "base/core/mutex.h"
#include "base/core/status_macros.h"
#include "base/work/callback_runner.h"

namespace plexus::tcp {

namespace {

constexpr uint64_t kWakeupId = ~uint64_t{0};
// The loop thread stays off the sockets while callers poll, and for this long after the last
// caller's round: back-to-back operations then never bounce between threads.
constexpr absl::Duration kCallerGrace = absl::Milliseconds(1);
// While callers keep polling, the loop thread looks half as often each time, down to once per
// this: each look wakes a thread on a core the ranks are busy on.
constexpr absl::Duration kLongestLoopLook = absl::Milliseconds(8);
// How long a waiting caller polls without sleeping (yielding the core between polls).
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(500);
// A caller spinning on one socket polls every socket, ring and deadline this often.
constexpr uint32_t kFullPollEvery = 4;

std::vector<bool> SocketPeers(int size, int rank, const ShmLinks* rings) {
  std::vector<bool> socket(size, true);
  socket[rank] = false;
  for (int peer = 0; rings != nullptr && peer < size; ++peer) {
    if (rings->Linked(peer)) socket[peer] = false;
  }
  return socket;
}

}  // namespace

// Everything the sockets need, shared between the transport, its loop thread and threads
// waiting on its operations. One thread at a time polls (the "poller"); all socket and
// matching state is touched under `loop_mu` only, through LoopLock. Works the loop finishes
// are completed after loop_mu is released, one thread at a time, in the order they finished:
// their callbacks may post again, and a waiter's wake-up should not wait for the lock.
class TcpTransport::Engine {
 public:
  enum class Poller { kNone, kLoop, kCaller };

  // Holds loop_mu for its scope. On leaving, queues the Works the loop finished meanwhile
  // (still under loop_mu, so the queue keeps their order), releases loop_mu, then completes
  // what is queued unless another thread is already doing so.
  class ABSL_SCOPED_LOCKABLE LoopLock {
   public:
    explicit LoopLock(Engine& engine) ABSL_EXCLUSIVE_LOCK_FUNCTION(engine.loop_mu)
        : engine_(engine) {
      engine_.loop_mu.lock();
    }
    ~LoopLock() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      engine_.QueueFinished();
      engine_.loop_mu.unlock();
      engine_.CompleteQueued();
    }
    LoopLock(const LoopLock&) = delete;
    LoopLock& operator=(const LoopLock&) = delete;

   private:
    Engine& engine_;
  };

  Engine(ScopedFd epoll, ScopedFd wakeup) : epoll_(std::move(epoll)), wakeup_(std::move(wakeup)) {}

  // Runs `command` on the loop state at the next poll round. With `caller_polls_next`, the
  // calling thread is about to wait (and so poll) itself: the loop thread is left parked
  // (it still looks by itself, should that wait not come).
  void Post(std::function<void(Loop&)> command, bool caller_polls_next) {
    {
      MutexLock lock(inbox_mu_);
      inbox_.push_back(std::move(command));
      inbox_waiting_.store(true, std::memory_order_release);
    }
    Wake();
    if (caller_polls_next) return;
    MutexLock role(role_mu_);
    if (poller_ == Poller::kNone) {
      urgent_ = true;  // Nobody is polling: the loop thread takes over at once.
      loop_cv_.notify_one();
    }
  }

  void Wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wakeup_.get(), &one, sizeof(one));
  }

  // One epoll_wait of at most `timeout_ms` (0 unless every ring is empty and flagged asleep),
  // then the events, the rings, queued commands and deadlines. `now` is the caller's clock
  // reading: a spinning round (timeout 0) reads the clock no further. Returns how many sockets
  // and rings had something (0: an empty round).
  int PollRound(int timeout_ms, absl::Time now) {
    epoll_event events[64];
    bool asleep = false;
    if (timeout_ms > 0) {
      LoopLock lock(*this);
      if (loop != nullptr && loop->shm_peers() > 0) {
        asleep = loop->PrepareToSleep();
        if (!asleep) timeout_ms = 0;
      }
    }
    next_wake_.store(absl::ToUnixNanos(now + absl::Milliseconds(timeout_ms)),
                     std::memory_order_release);
    int n = epoll_wait(epoll_.get(), events, 64, timeout_ms);
    if (timeout_ms > 0) now = FastNow();
    LoopLock lock(*this);
    if (loop == nullptr) return n;
    if (asleep) loop->Awake();
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeupId) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = read(wakeup_.get(), &count, sizeof(count));
        continue;
      }
      loop->OnEvent(static_cast<int>(events[i].data.u64), events[i].events);
    }
    std::vector<std::function<void(Loop&)>> commands;
    {
      MutexLock inbox_lock(inbox_mu_);
      commands.swap(inbox_);
      inbox_waiting_.store(false, std::memory_order_relaxed);
    }
    n += loop->PollRings();
    for (auto& command : commands) command(*loop);
    loop->ExpireDeadlines(now);
    return n;
  }

  // A caller waiting on `work`: polls until it completes or `timeout` passes, or waits while
  // another thread polls. Leaves early when the transport stops. `source`: the peer whose
  // socket the work receives from (-1 for sends, any-source receives and ring peers). While
  // spinning on it, most rounds only read that socket (one system call where epoll and a read would
  // take two; oversubscribed ranks feel every one); each kFullPollEvery-th round, and any round
  // with posted commands waiting, polls everything, so sends the loop holds, other peers and
  // deadlines still move.
  void DriveUntilDone(const Work& work, absl::Duration timeout, int source) {
    const absl::Time start = FastNow();
    const absl::Time deadline =
        timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : start + timeout;
    // Spin first unless sleeping at once has been faster (wait_policy.h).
    WaitPolicy& policy = WaitPolicy::Shared();
    const absl::Time spin_until = policy.SpinNow(start) ? start + kSpinBeforeSleep : start;
    uint32_t spin_rounds = 0;
    UniqueLock role(role_mu_);
    ++caller_waiters_;
    while (!work.IsCompleted() && !stopping.load(std::memory_order_acquire)) {
      const absl::Time now = FastNow();
      if (now >= deadline) break;
      if (poller_ == Poller::kNone) {
        poller_ = Poller::kCaller;
        role.unlock();
        // Spin briefly before sleeping: a reply due in microseconds costs less than a
        // wake-up. Each empty round yields the core, so oversubscribed ranks still run.
        const bool spin = now < spin_until;
        if (spin && source >= 0 && ++spin_rounds % kFullPollEvery != 0 &&
            !inbox_waiting_.load(std::memory_order_acquire)) {
          if (!ReadNow(source) && !work.IsCompleted()) sched_yield();
        } else {
          const int timeout_ms = spin ? 0 : SleepMs(now, deadline);
          if (PollRound(timeout_ms, now) == 0 && spin) sched_yield();
        }
        role.lock();
        poller_ = Poller::kNone;
        ++caller_rounds_;
        if (caller_waiters_ > 1) role_cv_.notify_all();
        continue;
      }
      if (poller_ == Poller::kLoop && !kicked_) {
        kicked_ = true;  // Ask the loop thread to hand over after its current round.
        Wake();
      }
      role_cv_.wait_for(
          role, absl::ToChronoNanoseconds(std::min(deadline - now, absl::Milliseconds(100))));
    }
    --caller_waiters_;
    policy.WaitEnded(FastNow());
  }

  // Reads `source`'s socket without asking epoll first; whether any bytes came.
  bool ReadNow(int source) {
    LoopLock lock(*this);
    return loop != nullptr && loop->ReadNow(source);
  }

  // How long a caller's poll round may sleep: to the loop's next deadline or the caller's.
  int SleepMs(absl::Time now, absl::Time deadline) {
    LoopLock lock(*this);
    if (loop == nullptr) return 0;
    return std::min(loop->NextTimeoutMs(now), MillisecondsUntil(deadline, now));
  }

  // The loop thread's life: rounds until stopped, then goodbyes and a bounded drain; the loop
  // (and whatever is still pending) ends on this thread.
  void RunLoopThread() {
    absl::Time close_deadline = absl::InfiniteFuture();
    while (true) {
      int timeout_ms;
      {
        LoopLock lock(*this);
        if (stopping.load(std::memory_order_acquire)) {
          // Say goodbye, then give the frames still queued a bounded time to leave. After an
          // abort only the goodbyes are worth it, and a frozen peer that stopped reading would
          // hold them until the heartbeat gives up on it: a moment, not seconds.
          if (close_deadline == absl::InfiniteFuture()) {
            close_deadline =
                absl::Now() + (loop->broken() ? absl::Milliseconds(100) : absl::Seconds(5));
            loop->SayGoodbye();
          }
          if (loop->Drained() || absl::Now() >= close_deadline) break;
          timeout_ms = 10;
        } else {
          timeout_ms = loop->NextTimeoutMs(FastNow());
        }
      }
      LoopThreadRound(timeout_ms);
    }
    std::unique_ptr<Loop> ended;
    {
      LoopLock lock(*this);
      ended = std::move(loop);
    }
    ended.reset();  // Fails whatever is still pending, outside the lock.
  }

  // The loop thread: waits while callers poll, then runs one round itself.
  void LoopThreadRound(int timeout_ms) {
    {
      UniqueLock role(role_mu_);
      // Park while a caller polls (never two pollers: the rings' asleep flags assume one),
      // and unless something is urgent, while one waits to or polled since the last look.
      while (!stopping.load(std::memory_order_acquire) &&
             (poller_ != Poller::kNone ||
              (!urgent_ && (caller_waiters_ > 0 || caller_rounds_ != loop_seen_rounds_)))) {
        loop_seen_rounds_ = caller_rounds_;
        ++loop_looks_;
        loop_cv_.wait_for(role, absl::ToChronoNanoseconds(loop_look_every_));
        loop_look_every_ = std::min(2 * loop_look_every_, kLongestLoopLook);
      }
      loop_look_every_ = kCallerGrace;
      urgent_ = false;
      kicked_ = false;
      poller_ = Poller::kLoop;
    }
    PollRound(timeout_ms, FastNow());
    MutexLock role(role_mu_);
    poller_ = Poller::kNone;
    if (caller_waiters_ > 0) role_cv_.notify_all();
  }

  // Wakes everything that might be waiting for the polling role.
  void Stop() {
    stopping.store(true, std::memory_order_release);
    Wake();
    MutexLock role(role_mu_);
    loop_cv_.notify_all();
    role_cv_.notify_all();
  }

  uint64_t loop_looks() {
    MutexLock role(role_mu_);
    return loop_looks_;
  }

  // Unix ns by which the current poll round ends at the latest.
  int64_t next_wake() const { return next_wake_.load(std::memory_order_acquire); }

  // The loop's state is touched by whichever thread polls and, for receives and aborts, by
  // callers.
  Mutex loop_mu;
  std::unique_ptr<Loop> loop ABSL_GUARDED_BY(loop_mu);
  std::atomic<bool> stopping{false};

 private:
  // Moves what the loop finished to the completion queue.
  void QueueFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_mu) {
    if (loop == nullptr || !loop->HasFinished()) return;
    MutexLock lock(done_mu_);
    loop->TakeFinished(done_);
    queued_.store(true, std::memory_order_release);
  }

  // Completes the queued Works in order, unless another thread is at it: that one then also
  // completes those queued since, and wakes the poller when done (a caller may be about to
  // sleep in epoll_wait on a Work it finished but another thread completed).
  void CompleteQueued() ABSL_LOCKS_EXCLUDED(loop_mu, done_mu_) {
    if (!queued_.load(std::memory_order_acquire)) return;
    {
      MutexLock lock(done_mu_);
      if (completing_) {
        handed_over_ = true;
        return;
      }
      completing_ = true;
    }
    ProgressScope progress;  // Hands user callbacks to a callback thread (callback_runner.h).
    while (true) {
      bool wake = false;
      bool ended = false;  // completing_batch_ is no longer this thread's once this is set.
      {
        MutexLock lock(done_mu_);
        completing_batch_.clear();
        completing_batch_.swap(done_);
        if (completing_batch_.empty()) {
          ended = true;
          completing_ = false;
          queued_.store(false, std::memory_order_relaxed);
          wake = std::exchange(handed_over_, false);
        }
      }
      if (ended) {
        if (wake) Wake();
        return;
      }
      for (Loop::Finished& finished : completing_batch_) {
        finished.work->Complete(finished.status);
      }
    }
  }

  const ScopedFd epoll_;
  const ScopedFd wakeup_;
  std::atomic<int64_t> next_wake_{0};
  Mutex inbox_mu_;
  std::vector<std::function<void(Loop&)>> inbox_ ABSL_GUARDED_BY(inbox_mu_);
  std::atomic<bool> inbox_waiting_{false};  // inbox_ holds commands; read without the lock.

  Mutex role_mu_;
  std::condition_variable role_cv_;  // Callers waiting for the role or their completion.
  std::condition_variable loop_cv_;  // The loop thread waiting for callers to go quiet.
  Poller poller_ ABSL_GUARDED_BY(role_mu_) = Poller::kNone;
  int caller_waiters_ ABSL_GUARDED_BY(role_mu_) = 0;
  uint64_t caller_rounds_ ABSL_GUARDED_BY(role_mu_) = 0;
  uint64_t loop_seen_rounds_ ABSL_GUARDED_BY(role_mu_) =
      0;  // caller_rounds_ when the loop thread last looked.
  absl::Duration loop_look_every_ ABSL_GUARDED_BY(role_mu_) =
      kCallerGrace;                                    // The loop thread's next wait while parked.
  uint64_t loop_looks_ ABSL_GUARDED_BY(role_mu_) = 0;  // Times the parked loop thread woke to look.
  bool kicked_ ABSL_GUARDED_BY(role_mu_) = false;
  bool urgent_ ABSL_GUARDED_BY(role_mu_) = false;

  Mutex done_mu_;  // Taken inside loop_mu, never the other way round.
  std::vector<Loop::Finished> done_ ABSL_GUARDED_BY(done_mu_);  // Finished, not yet completed.
  std::atomic<bool> queued_{false};                             // done_ may hold Works.
  bool completing_ ABSL_GUARDED_BY(done_mu_) = false;           // A thread is completing Works.
  bool handed_over_ ABSL_GUARDED_BY(done_mu_) = false;  // Another thread's Works were among them.
  std::vector<Loop::Finished> completing_batch_;        // Owned by the thread that set completing_.
};

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Create(TcpTransportOptions options) {
  if (options.store == nullptr || options.size < 1 || options.rank < 0 ||
      options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("tcp transport: bad rank ", options.rank,
                                                   " / size ", options.size, " or no store"));
  }
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcp transport: rank ", options.rank, " was given no address to listen on"));
  }
  MeshOptions mesh{options.store.get(), options.rank,    options.size,
                   options.group_name,  options.address, options.connect_timeout,
                   options.cancelled};
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  ShmConfig shm;
  if (options.shared_memory_config.has_value()) {
    shm = *options.shared_memory_config;
  } else {
    ASSIGN_OR_RETURN(shm, ShmConfigFromEnvironment());
    RETURN_IF_ERROR(WaitPolicy::ModeFromEnvironment().status());
  }
  if (!options.heartbeat.has_value()) {
    ASSIGN_OR_RETURN(options.heartbeat, HeartbeatFromEnvironment());
  }
  ASSIGN_OR_RETURN(options.secret, auth::ResolveSecret(options.secret));
  mesh.secret = *options.secret;
  ASSIGN_OR_RETURN(mesh.tls, auth::TlsContext::Resolve(options.tls));
  ASSIGN_OR_RETURN(std::vector<Connection> peers, ConnectMesh(mesh));
  ASSIGN_OR_RETURN(std::unique_ptr<ShmLinks> rings,
                   LinkSameHostPeers(peers, options.rank, shm, deadline));
  return std::unique_ptr<TcpTransport>(
      new TcpTransport(std::move(options), std::move(peers), std::move(rings)));
}

TcpTransport::TcpTransport(TcpTransportOptions options, std::vector<Connection> peers,
                           std::unique_ptr<ShmLinks> rings)
    : options_(std::move(options)),
      shm_peers_(rings != nullptr ? rings->linked : 0),
      arena_(rings != nullptr ? rings->arena.get() : nullptr),
      host_of_(rings != nullptr ? rings->host_of : std::vector<int>()),
      reads_socket_(SocketPeers(options_.size, options_.rank, rings.get())) {
  ScopedFd epoll(epoll_create1(EPOLL_CLOEXEC));
  ScopedFd wakeup(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeupId;
  epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wakeup.get(), &event);
  std::vector<SendLane*> lanes;
  for (int i = 0; i < options_.size; ++i) {
    lanes_.push_back(std::make_unique<SendLane>());
    lanes.push_back(lanes_.back().get());
  }
  Loop::SignatureDescriber describe = options_.describe_signature;
  if (!describe) {
    describe = [](uint64_t signature) {
      return absl::StrCat("signature 0x", absl::Hex(signature));
    };
  }
  const int epoll_fd = epoll.get();
  engine_ = std::make_shared<Engine>(std::move(epoll), std::move(wakeup));
  {
    Engine::LoopLock lock(*engine_);  // Uncontended: no thread has the engine yet.
    engine_->loop =
        std::make_unique<Loop>(options_.rank, std::move(peers), std::move(rings), std::move(lanes),
                               epoll_fd, options_.max_message_bytes, options_.max_unexpected_bytes,
                               options_.heartbeat.value_or(kDefaultHeartbeat), std::move(describe));
  }
  thread_ = std::thread([engine = engine_.get()] { engine->RunLoopThread(); });
}

void TcpTransport::AttachWaitHook(const std::shared_ptr<Op>& op) {
  std::weak_ptr<Engine> weak = engine_;
  const Work* work = op->work.get();  // The hook only runs inside this Work's own Wait().
  const int source = op->kind == Op::Kind::kRecv && op->peer >= 0 && op->peer < options_.size &&
                             reads_socket_[op->peer]
                         ? op->peer
                         : -1;
  op->work->SetWaitHook([weak, work, source](absl::Duration timeout) {
    if (std::shared_ptr<Engine> engine = weak.lock()) {
      engine->DriveUntilDone(*work, timeout, source);
    }
  });
}

void TcpTransport::PostReceive(const std::shared_ptr<Op>& op) {
  AttachWaitHook(op);
  bool destroyed = false;
  bool done = false;
  {
    Engine::LoopLock lock(*engine_);
    destroyed = engine_->loop == nullptr;
    if (!destroyed) engine_->loop->PostRecv(op);
    done = op->done;
  }
  if (destroyed) {
    op->work->Complete(absl::AbortedError("transport destroyed"));
    return;
  }
  if (done) return;
  // The poller sleeps until its own next deadline; wake it only if this one comes sooner.
  if (absl::ToUnixNanos(op->deadline) < engine_->next_wake()) engine_->Wake();
}

TcpTransport::~TcpTransport() {
  engine_->Stop();
  thread_.join();
}

namespace {

OpPtr MakeOp(Op::Kind kind, int peer, MessageTag tag, uint8_t* data, size_t size,
             absl::Duration timeout, const char* name, int world) {
  auto op = std::make_shared<Op>();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->size = size;
  op->timeout = timeout;
  const absl::Time now = FastNow();
  op->deadline = now + timeout;
  op->work = std::make_shared<Work>(name, world, /*sequence=*/-1, now);
  if (kind == Op::Kind::kSend) {
    EncodeHeader(op->header, FrameType::kData, tag.tag, tag.signature, size);
    op->payload = data;
  }
  return op;
}

}  // namespace

WorkPtr TcpTransport::Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                           absl::Duration timeout) {
  auto op = MakeOp(Op::Kind::kSend, peer, tag, const_cast<uint8_t*>(data.data()), data.size(),
                   timeout, "send", options_.size);
  // Fast path: nothing queued for this peer, so write from this thread.
  if (peer >= 0 && peer < options_.size && peer != options_.rank &&
      TrySendDirect(*lanes_[peer], op)) {
    op->done = true;
    op->work->AddBytesSent(static_cast<int64_t>(op->size));
    op->work->Complete(absl::OkStatus());
    return op->work;
  }
  AttachWaitHook(op);
  engine_->Post([op](Loop& loop) { loop.PostSend(op); }, SendsAwaitedByCaller());
  return op->work;
}

WorkPtr TcpTransport::Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                           absl::Duration timeout) {
  auto op =
      MakeOp(Op::Kind::kRecv, peer, tag, data.data(), data.size(), timeout, "recv", options_.size);
  PostReceive(op);
  return op->work;
}

WorkPtr TcpTransport::RecvFromAny(MessageTag tag, absl::Span<uint8_t> data,
                                  absl::Duration timeout) {
  auto op = MakeOp(Op::Kind::kRecvAny, -1, tag, data.data(), data.size(), timeout,
                   "recv_any_source", options_.size);
  PostReceive(op);
  return op->work;
}

// Aborts run right here rather than at the next poll round: once they return, no receive of
// the operation writes into its caller's buffer again (the collective may hand it back at once).
void TcpTransport::RunOnLoopNow(const std::function<void(Loop&)>& command) {
  {
    Engine::LoopLock lock(*engine_);
    if (engine_->loop == nullptr) return;
    command(*engine_->loop);
  }
  engine_->Wake();  // The poller writes the abort frames.
}

void TcpTransport::AbortOperation(uint64_t operation, absl::Status reason) {
  RunOnLoopNow([&](Loop& loop) { loop.AbortOperation(operation, reason, true); });
}

void TcpTransport::Abort(absl::Status reason) {
  RunOnLoopNow([&](Loop& loop) { loop.AbortAll(reason); });
}

uint64_t TcpTransport::loop_thread_looks() const { return engine_->loop_looks(); }

std::vector<int> TcpTransport::LostPeers() {
  std::vector<int> lost;
  RunOnLoopNow([&](Loop& loop) { lost = loop.LostPeers(); });
  return lost;
}

}  // namespace plexus::tcp
