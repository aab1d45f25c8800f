#include "executor/collectives.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"
#include "base/core/deadline.h"
#include "base/work/callback_runner.h"

namespace plexus::executor {

using algorithms::AlgorithmTable;
using algorithms::BinomialBroadcast;
using algorithms::BinomialReduce;
using algorithms::ByteBlock;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::CollectiveName;
using algorithms::KernelOp;
using algorithms::LinearGather;
using algorithms::LinearScatter;
using algorithms::MakeSignature;
using algorithms::PackTensors;
using algorithms::PairwiseAllToAll;
using algorithms::Partition;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::RingAllGather;
using algorithms::ScratchArena;
using algorithms::UnpackTensors;

namespace {

// A failure found outside the collective (a peer lost to its heartbeat breaks the transport)
// says which operation it ended: "all_reduce #12 on rank 0: rank 0 lost rank 2: ...".
absl::Status NameTheOperation(const absl::Status& status, CollectiveKind kind, uint64_t sequence,
                              int rank) {
  const std::string name = absl::StrCat(CollectiveName(kind), " #");
  if (absl::StrContains(status.message(), name)) return status;
  absl::Status named(status.code(),
                     absl::StrCat(name, sequence, " on rank ", rank, ": ", status.message()));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { named.SetPayload(url, payload); });
  return named;
}

std::vector<Tensor> Copy(absl::Span<const Tensor> tensors) {
  return std::vector<Tensor>(tensors.begin(), tensors.end());
}

int64_t Rows(const Tensor& tensor) {
  return tensor.shape().empty() ? tensor.numel() : tensor.shape()[0];
}

}  // namespace

class Collectives::QueuedWork : public Work {
 public:
  QueuedWork(CollectiveKind kind, int size, uint64_t sequence, absl::Time start,
             std::shared_ptr<Queue> queue)
      : Work(std::string(CollectiveName(kind)), size, static_cast<int64_t>(sequence), start),
        queue_(std::move(queue)) {}

  // Runs the body (once).
  virtual absl::Status Run(CollectiveContext& ctx) = 0;

 private:
  void OfferToWaiter(absl::Duration wait_timeout) override {
    RunInWaiter(*queue_, static_cast<uint64_t>(sequence()), wait_timeout);
  }

  // Owned, not weak: a Work may outlive the Collectives, and the queue (stopping by then)
  // answers its waits. The cycle through the queued tasks ends as they are taken.
  const std::shared_ptr<Queue> queue_;
};

template <typename F>
class Collectives::QueuedWorkWith final : public QueuedWork {
 public:
  QueuedWorkWith(CollectiveKind kind, int size, uint64_t sequence, absl::Time start,
                 std::shared_ptr<Queue> queue, F body)
      : QueuedWork(kind, size, sequence, start, std::move(queue)), body_(std::move(body)) {}

  absl::Status Run(CollectiveContext& ctx) override {
    absl::Status status = (*body_)(ctx);
    body_.reset();  // What it captured goes now, not with the Work.
    return status;
  }

 private:
  std::optional<F> body_;
};

Collectives::Collectives(std::shared_ptr<Transport> transport, AlgorithmTable table)
    : transport_(std::move(transport)),
      table_(std::move(table)),
      done_(Work::Finished(absl::OkStatus(), "collective", transport_->size())) {
  worker_ = std::thread([this] { Worker(); });
}

Collectives::~Collectives() {
  {
    MutexLock lock(queue_->mu);
    queue_->stopping = true;
  }
  queue_->ready.notify_all();
  worker_.join();
}

WorkPtr Collectives::Submit(CollectiveKind kind, DType dtype, int64_t count, absl::Duration timeout,
                            Body body) {
  return Enqueue(kind, dtype, count, timeout, /*blocking=*/false, std::move(body));
}

template <typename F>
absl::Status Collectives::RunCurrent(CollectiveKind kind, uint64_t sequence, uint64_t signature,
                                     absl::Duration timeout, Work* work, absl::Time start,
                                     F&& body) {
  CollectiveContext ctx(*transport_, kind, sequence, signature, timeout, work, &arena_, start);
  // Tasks run one at a time, so they may use the transport's shared-memory arena. Peers
  // waiting there can tell from the announcement that this rank runs another collective.
  if (SharedArena* shared = transport_->shared_arena()) {
    shared->Announce(signature);
    ctx.UseSharedArena(shared);
  }
  absl::Status status;
  {
    const ScopedSendsAwaited awaited;  // Bodies wait on their sends before they return.
    status = body(ctx);
  }
  if (!status.ok()) {
    status = NameTheOperation(ctx.Fail(status), kind, sequence, transport_->rank());
  }
  return status;
}

template <typename F>
WorkPtr Collectives::Enqueue(CollectiveKind kind, DType dtype, int64_t count,
                             absl::Duration timeout, bool blocking, F body) {
  if (blocking) {
    if (std::optional<absl::Status> status = RunInPlace(kind, dtype, count, timeout, body)) {
      return status->ok() ? done_
                          : Work::Finished(*status, std::string(CollectiveName(kind)), size());
    }
  }
  MutexLock lock(queue_->mu);
  const uint64_t sequence = next_sequence_++;
  const absl::Time now = FastNow();
  auto work =
      std::make_shared<QueuedWorkWith<F>>(kind, size(), sequence, now, queue_, std::move(body));
  // Deferred only where threads have been waiting on their collectives (blocking use): one
  // that issues and waits later (DDP's buckets) should not lose a millisecond.
  const bool deferred = !queue_->running && queue_->tasks.empty() && queue_->waiters_expected;
  queue_->tasks.push_back({deferred ? now : absl::InfinitePast(), deferred, kind, sequence,
                           MakeSignature(kind, dtype, sequence, count), timeout, work, this});
  queue_->last_issued = now;
  // A worker with a timer looks by itself; waking it here would race the caller for the task.
  if (queue_->worker_asleep) {
    ++queue_->woken_at_issue;
    queue_->ready.notify_one();
  }
  return work;
}

template <typename F>
std::optional<absl::Status> Collectives::RunInPlace(CollectiveKind kind, DType dtype, int64_t count,
                                                    absl::Duration timeout, F& body) {
  uint64_t sequence;
  {
    MutexLock lock(queue_->mu);
    if (queue_->running || !queue_->tasks.empty() || queue_->stopping) return std::nullopt;
    sequence = next_sequence_++;
    queue_->running = true;  // Keeps the worker, and waiters on other Works, off the queue.
    queue_->waiters_expected = true;  // The caller waits on its collectives.
  }
  absl::Status status =
      RunCurrent(kind, sequence, MakeSignature(kind, dtype, sequence, count), timeout,
                 /*work=*/nullptr, absl::InfinitePast(), body);
  FinishRunning();
  return status;
}

void Collectives::FinishRunning() {
  bool more;
  {
    MutexLock lock(queue_->mu);
    queue_->running = false;
    more = !queue_->tasks.empty() || queue_->stopping;
  }
  if (more) queue_->ready.notify_all();
}

Collectives::Task Collectives::TakeFront(Queue& queue) {
  Task task = std::move(queue.tasks.front());
  queue.tasks.pop_front();
  queue.running = true;
  return task;
}

void Collectives::Execute(Task& task) {
  // A deferred task's deadline counts from its issue (recent: claimed by a waiter, or by the
  // worker after kWaiterGrace), which saves reading the clock again.
  absl::Status status =
      RunCurrent(task.kind, task.sequence, task.signature, task.timeout, task.work.get(),
                 task.issued, [&](CollectiveContext& ctx) { return task.work->Run(ctx); });
  // The queue is free before the Work completes: a callback that issues a collective and
  // waits for it (torch's PowerSGD hook) finds it runnable, here or on the worker. `this` may
  // be gone after FinishRunning; the task owns its Work.
  FinishRunning();
  task.work->Complete(std::move(status));
}

void Collectives::RunInWaiter(Queue& queue, uint64_t sequence, absl::Duration wait_timeout) {
  Task task;
  {
    MutexLock lock(queue.mu);
    const bool ours = !queue.stopping && !queue.running && !queue.tasks.empty() &&
                      queue.tasks.front().sequence == sequence;
    if (ours && queue.tasks.front().timeout > wait_timeout) {
      // This wait may end before the collective would, so it cannot run it: the worker starts
      // it now rather than after its grace for a waiter, and does not hold later ones for one.
      queue.waiters_expected = false;
      Task& front = queue.tasks.front();
      if (front.deferred) {
        front.deferred = false;
        queue.ready.notify_all();
      }
      return;
    }
    queue.waiters_expected = true;  // Someone waits on an unfinished collective.
    if (!ours) return;
    task = TakeFront(queue);
    ++queue.waiter_runs;
  }
  // The owner cannot go away meanwhile: its destructor joins the worker, which waits for
  // `running` to clear before it looks at the queue again.
  task.owner->Execute(task);
}

uint64_t Collectives::worker_woken_at_issue() const {
  MutexLock lock(queue_->mu);
  return queue_->woken_at_issue;
}

uint64_t Collectives::worker_looks() const {
  MutexLock lock(queue_->mu);
  return queue_->worker_looks;
}

uint64_t Collectives::unclaimed_after_grace() const {
  MutexLock lock(queue_->mu);
  return queue_->unclaimed_after_grace;
}

void Collectives::Worker() {
  // The queue needs this thread: user callbacks of the Works it completes run elsewhere.
  ProgressScope progress;
  Queue& queue = *queue_;
  uint64_t seen_waiter_runs = 0;
  absl::Duration look_every = kWaiterGrace;
  while (true) {
    Task task;
    {
      UniqueLock lock(queue.mu);
      if (queue.stopping && !queue.running) {
        std::deque<Task> pending = std::move(queue.tasks);
        queue.tasks.clear();
        lock.unlock();  // Their callbacks run outside the queue's lock.
        for (Task& task : pending) {
          task.work->Complete(
              absl::AbortedError(absl::StrCat(CollectiveName(task.kind), " #", task.sequence,
                                              ": the backend was shut down before it ran")));
        }
        return;
      }
      const absl::Time now = FastNow();
      if (!queue.running && !queue.tasks.empty()) {
        const Task& front = queue.tasks.front();
        if (!front.deferred || now >= front.issued + kWaiterGrace) {
          // A deferred task nobody claimed: collectives here are issued now, waited on later.
          if (front.deferred) {
            queue.waiters_expected = false;
            ++queue.unclaimed_after_grace;
          }
          task = TakeFront(queue);
          look_every = kWaiterGrace;
        } else {
          queue.ready.wait_for(lock, absl::ToChronoNanoseconds(front.issued + kWaiterGrace - now));
          continue;
        }
      } else if (queue.waiter_runs != seen_waiter_runs || queue.running ||
                 (queue.waiters_expected &&
                  now - queue.last_issued < kWorkerLooksWhileIssuedWithin)) {
        // Waiting threads run the tasks: look again after a while instead of being woken for
        // every one, and less often the longer they keep it up. Also while one runs, or ran
        // lately: a look that finds a long collective still running (or the next not issued
        // yet) would otherwise sleep untimed, and issuing the next would wake it, with wake-up
        // priority over the ranks, every collective (64 ranks on 2 cores: a 1 KiB all-reduce
        // took 4.8-6.2 ms issued then waited for, against 2.2-2.3 ms blocking).
        seen_waiter_runs = queue.waiter_runs;
        ++queue.worker_looks;
        queue.ready.wait_for(lock, absl::ToChronoNanoseconds(look_every));
        look_every = std::min(2 * look_every, kLongestWorkerLook);
        continue;
      } else {
        look_every = kWaiterGrace;
        queue.worker_asleep = true;
        queue.ready.wait(lock);
        queue.worker_asleep = false;
        continue;
      }
    }
    Execute(task);
  }
}

absl::Status Collectives::RunAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                       DType dtype, const ReduceOp& op) {
  return AllReduceInPlace(ctx, table_, data, count, dtype, op);
}

WorkPtr Collectives::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  return Enqueue(
      CollectiveKind::kAllReduce, tensor.dtype(), tensor.numel(), options.timeout, options.blocking,
      [this, data = tensor.data(), count = tensor.numel(), dtype = tensor.dtype(), op = options.op](
          CollectiveContext& ctx) { return RunAllReduce(ctx, data, count, dtype, op); });
}

WorkPtr Collectives::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                        const AllReduceCoalescedOptions& options) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  return Enqueue(
      CollectiveKind::kAllReduceCoalesced, tensors[0].dtype(), total, options.timeout,
      options.blocking, [this, list = Copy(tensors), total, options](CollectiveContext& ctx) {
        // One fused reduction over the tensors packed end to end.
        uint8_t* packed =
            ctx.Scratch(ScratchArena::kPacked, static_cast<size_t>(total) * list[0].element_size());
        PackTensors(list, packed);
        absl::Status status = RunAllReduce(ctx, packed, total, list[0].dtype(), options.op);
        if (!status.ok()) return status;
        UnpackTensors(packed, list);
        return absl::OkStatus();
      });
}

WorkPtr Collectives::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  return Enqueue(CollectiveKind::kBroadcast, tensor.dtype(), tensor.numel(), options.timeout,
                 options.blocking, [tensor, options](CollectiveContext& ctx) {
                   return BinomialBroadcast(ctx, tensor.data(), tensor.nbytes(), options.root_rank);
                 });
}

WorkPtr Collectives::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  return Enqueue(CollectiveKind::kReduce, tensor.dtype(), tensor.numel(), options.timeout,
                 options.blocking, [this, tensor, options](CollectiveContext& ctx) {
                   const int64_t count = tensor.numel();
                   const DType dtype = tensor.dtype();
                   // Scale a copy: off the root the caller's tensor must stay as it was.
                   void* input = tensor.data();
                   if (options.op.kind == ReduceOpKind::kPremulSum) {
                     uint8_t* scaled = ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
                     if (tensor.nbytes() > 0) std::memcpy(scaled, tensor.data(), tensor.nbytes());
                     PreScale(scaled, count, dtype, options.op);
                     input = scaled;
                   }
                   absl::Status status = BinomialReduce(
                       ctx, input, count, dtype, KernelOp(options.op.kind), options.root_rank);
                   if (!status.ok() || rank() != options.root_rank) return status;
                   if (input != tensor.data() && tensor.nbytes() > 0) {
                     std::memcpy(tensor.data(), input, tensor.nbytes());
                   }
                   PostScale(tensor.data(), count, dtype, options.op, size());
                   return absl::OkStatus();
                 });
}

WorkPtr Collectives::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                               const AllGatherOptions& options) {
  return Enqueue(CollectiveKind::kAllGather, input.dtype(), input.numel(), options.timeout,
                 options.blocking, [this, list = Copy(outputs), input](CollectiveContext& ctx) {
                   std::vector<uint8_t*> blocks;
                   std::vector<size_t> bytes;
                   for (const Tensor& t : list) {
                     blocks.push_back(t.bytes());
                     bytes.push_back(t.nbytes());
                   }
                   if (input.nbytes() > 0 && blocks[rank()] != input.bytes()) {
                     std::memmove(blocks[rank()], input.data(), input.nbytes());
                   }
                   return RingAllGather(ctx, blocks, bytes);
                 });
}

WorkPtr Collectives::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                         const AllGatherOptions& options) {
  return Enqueue(CollectiveKind::kAllGather, input.dtype(), input.numel(), options.timeout,
                 options.blocking, [this, output, input](CollectiveContext& ctx) {
                   std::vector<uint8_t*> blocks;
                   std::vector<size_t> bytes(size(), input.nbytes());
                   for (int i = 0; i < size(); ++i) {
                     blocks.push_back(output.bytes() + i * input.nbytes());
                   }
                   if (input.nbytes() > 0 && blocks[rank()] != input.bytes()) {
                     std::memmove(blocks[rank()], input.data(), input.nbytes());
                   }
                   return RingAllGather(ctx, blocks, bytes);
                 });
}

WorkPtr Collectives::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                            const GatherOptions& options) {
  return Enqueue(CollectiveKind::kGather, input.dtype(), input.numel(), options.timeout,
                 options.blocking, [list = Copy(outputs), input, options](CollectiveContext& ctx) {
                   std::vector<void*> pointers;
                   for (const Tensor& t : list) pointers.push_back(t.data());
                   return LinearGather(ctx, input.data(), input.nbytes(), pointers,
                                       options.root_rank);
                 });
}

WorkPtr Collectives::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                             const ScatterOptions& options) {
  return Enqueue(CollectiveKind::kScatter, output.dtype(), output.numel(), options.timeout,
                 options.blocking, [list = Copy(inputs), output, options](CollectiveContext& ctx) {
                   std::vector<const void*> pointers;
                   for (const Tensor& t : list) pointers.push_back(t.data());
                   return LinearScatter(ctx, output.data(), output.nbytes(), pointers,
                                        options.root_rank);
                 });
}

absl::Status Collectives::RunReduceScatter(CollectiveContext& ctx, uint8_t* packed,
                                           const Tensor& output, const ReduceOp& op) {
  const int64_t count = output.numel();
  const DType dtype = output.dtype();
  PreScale(packed, count * size(), dtype, op);
  Partition blocks;
  for (int i = 0; i < size(); ++i) {
    blocks.counts.push_back(count);
    blocks.offsets.push_back(count * i);
  }
  absl::Status status = RingReduceScatter(ctx, packed, blocks, dtype, KernelOp(op.kind));
  if (!status.ok()) return status;
  if (output.nbytes() > 0) {
    std::memcpy(output.data(), packed + rank() * output.nbytes(), output.nbytes());
  }
  PostScale(output.data(), count, dtype, op, size());
  return absl::OkStatus();
}

WorkPtr Collectives::ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                   const ReduceScatterOptions& options) {
  return Enqueue(
      CollectiveKind::kReduceScatter, output.dtype(), output.numel(), options.timeout,
      options.blocking, [this, list = Copy(inputs), output, options](CollectiveContext& ctx) {
        uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, output.nbytes() * list.size());
        PackTensors(list, packed);
        return RunReduceScatter(ctx, packed, output, options.op);
      });
}

WorkPtr Collectives::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& options) {
  return Enqueue(CollectiveKind::kReduceScatter, output.dtype(), output.numel(), options.timeout,
                 options.blocking, [this, input, output, options](CollectiveContext& ctx) {
                   // The input is the caller's: reduce in a copy.
                   uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, input.nbytes());
                   if (input.nbytes() > 0) std::memcpy(packed, input.data(), input.nbytes());
                   return RunReduceScatter(ctx, packed, output, options.op);
                 });
}

WorkPtr Collectives::AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                              const AllToAllOptions& options) {
  return Enqueue(CollectiveKind::kAllToAll, inputs[0].dtype(), 0, options.timeout, options.blocking,
                 [outs = Copy(outputs), ins = Copy(inputs)](CollectiveContext& ctx) {
                   std::vector<ByteBlock> send, recv;
                   for (const Tensor& t : ins) send.push_back({t.bytes(), t.nbytes()});
                   for (const Tensor& t : outs) recv.push_back({t.bytes(), t.nbytes()});
                   return PairwiseAllToAll(ctx, send, recv);
                 });
}

WorkPtr Collectives::AllToAllSingle(const Tensor& output, const Tensor& input,
                                    absl::Span<const int64_t> output_split_sizes,
                                    absl::Span<const int64_t> input_split_sizes,
                                    const AllToAllOptions& options) {
  std::vector<int64_t> out_splits(output_split_sizes.begin(), output_split_sizes.end());
  std::vector<int64_t> in_splits(input_split_sizes.begin(), input_split_sizes.end());
  return Enqueue(
      CollectiveKind::kAllToAll, input.dtype(), 0, options.timeout, options.blocking,
      [output, input, out_splits, in_splits](CollectiveContext& ctx) {
        // Splits count rows of the first dimension; a row is numel / rows elements.
        auto blocks = [](const Tensor& t, const std::vector<int64_t>& splits) {
          const int64_t rows = Rows(t);
          const size_t row_bytes = rows == 0 ? 0 : t.nbytes() / static_cast<size_t>(rows);
          std::vector<ByteBlock> result;
          size_t offset = 0;
          for (int64_t split : splits) {
            result.push_back({t.bytes() + offset, static_cast<size_t>(split) * row_bytes});
            offset += static_cast<size_t>(split) * row_bytes;
          }
          return result;
        };
        return PairwiseAllToAll(ctx, blocks(input, in_splits), blocks(output, out_splits));
      });
}

WorkPtr Collectives::Barrier(const BarrierOptions& options) {
  return Enqueue(CollectiveKind::kBarrier, DType::kUInt8, 0, options.timeout, options.blocking,
                 [this](CollectiveContext& ctx) { return algorithms::Barrier(ctx, table_); });
}

WorkPtr Collectives::Send(const Tensor& tensor, int dst, const SendOptions& options) {
  return transport_->Send(dst, {MakeTag(kPointToPointOperationBase + options.tag, 0), 0},
                          {tensor.bytes(), tensor.nbytes()}, options.timeout);
}

WorkPtr Collectives::Recv(const Tensor& tensor, int src, const RecvOptions& options) {
  return transport_->Recv(src, {MakeTag(kPointToPointOperationBase + options.tag, 0), 0},
                          {tensor.bytes(), tensor.nbytes()}, options.timeout);
}

WorkPtr Collectives::RecvAnySource(const Tensor& tensor, const RecvOptions& options) {
  return transport_->RecvFromAny({MakeTag(kPointToPointOperationBase + options.tag, 0), 0},
                                 {tensor.bytes(), tensor.nbytes()}, options.timeout);
}

WorkPtr Collectives::Run(const Collective& call) {
  // A collective added since the methods above runs its algorithm here:
  //   if (call.kind == CollectiveKind::kX) return Enqueue(call.kind, ..., body calling it);
  return CallPerKind(call, *this, [&] {
    return Work::Finished(absl::UnimplementedError(absl::StrCat(
                              "the algorithm library has no schedule for ", call.name())),
                          std::string(call.name()), size());
  });
}

}  // namespace plexus::executor
