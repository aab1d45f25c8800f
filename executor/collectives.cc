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
using algorithms::ByteBlock;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::CollectiveName;
using algorithms::KernelOp;
using algorithms::MakeSignature;
using algorithms::PackTensors;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::RunSchedule;
using algorithms::ScheduleCall;
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

void Collectives::FailUnrun(std::deque<Task> pending) {
  for (Task& task : pending) {
    task.work->Complete(
        absl::AbortedError(absl::StrCat(CollectiveName(task.kind), " #", task.sequence,
                                        ": the backend was shut down before it ran")));
  }
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
        lock.unlock();
        FailUnrun(std::move(pending));
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

namespace {

// What each kind runs on algorithms/, built from the call: what is the kind's own (scaling,
// packing, this rank's block copied in) around the schedule the table picks (RunSchedule). The
// call's spans end with Run, so a body keeps copies of the tensors (views) and splits it uses;
// `table` is the Collectives' own, which outlives its queued work.

std::vector<ByteBlock> Blocks(const std::vector<Tensor>& tensors) {
  std::vector<ByteBlock> blocks;
  for (const Tensor& t : tensors) blocks.push_back({t.bytes(), t.nbytes()});
  return blocks;
}

auto AllReduceBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, tensor = call.tensor(), op = call.op](CollectiveContext& ctx) {
    return AllReduceInPlace(ctx, table, tensor.data(), tensor.numel(), tensor.dtype(), op);
  };
}

auto BarrierBody(const AlgorithmTable& table) {
  return [&table](CollectiveContext& ctx) {
    return RunSchedule("barrier", 0, ScheduleCall{ctx, table, nullptr});
  };
}

auto AllReduceCoalescedBody(const Collective& call, const AlgorithmTable& table, int64_t total) {
  return [&table, list = Copy(call.outputs), total, op = call.op](CollectiveContext& ctx) {
    // One fused reduction over the tensors packed end to end.
    uint8_t* packed =
        ctx.Scratch(ScratchArena::kPacked, static_cast<size_t>(total) * list[0].element_size());
    PackTensors(list, packed);
    absl::Status status = AllReduceInPlace(ctx, table, packed, total, list[0].dtype(), op);
    if (!status.ok()) return status;
    UnpackTensors(packed, list);
    return absl::OkStatus();
  };
}

auto BroadcastBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, tensor = call.tensor(), root = call.root](CollectiveContext& ctx) {
    ScheduleCall schedule{ctx, table, nullptr};
    schedule.data = tensor.data();
    schedule.count = static_cast<int64_t>(tensor.nbytes());
    schedule.dtype = DType::kUInt8;
    schedule.root = root;
    return RunSchedule("broadcast", tensor.nbytes(), schedule);
  };
}

auto ReduceBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, tensor = call.tensor(), op = call.op, root = call.root](CollectiveContext& ctx) {
    ScheduleCall schedule{ctx, table, nullptr};
    schedule.count = tensor.numel();
    schedule.dtype = tensor.dtype();
    schedule.op = KernelOp(op.kind);
    schedule.root = root;
    // Scale a copy: off the root the caller's tensor must stay as it was.
    schedule.data = tensor.data();
    if (op.kind == ReduceOpKind::kPremulSum) {
      uint8_t* scaled = ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
      if (tensor.nbytes() > 0) std::memcpy(scaled, tensor.data(), tensor.nbytes());
      PreScale(scaled, schedule.count, schedule.dtype, op);
      schedule.data = scaled;
    }
    absl::Status status = RunSchedule("reduce", tensor.nbytes(), schedule);
    if (!status.ok() || ctx.rank() != root) return status;
    if (schedule.data != tensor.data() && tensor.nbytes() > 0) {
      std::memcpy(tensor.data(), schedule.data, tensor.nbytes());
    }
    PostScale(tensor.data(), schedule.count, schedule.dtype, op, ctx.size());
    return absl::OkStatus();
  };
}

// All-gather into `blocks`, this rank's own block copied in from `input` first.
absl::Status GatherBlocks(CollectiveContext& ctx, const AlgorithmTable& table,
                          std::vector<ByteBlock> blocks, const Tensor& input) {
  if (input.nbytes() > 0 && blocks[ctx.rank()].data != input.bytes()) {
    std::memmove(blocks[ctx.rank()].data, input.data(), input.nbytes());
  }
  ScheduleCall schedule{ctx, table, nullptr};
  schedule.blocks = std::move(blocks);
  return RunSchedule("all_gather", input.nbytes(), std::move(schedule));
}

auto AllGatherBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, list = Copy(call.outputs), input = call.input()](CollectiveContext& ctx) {
    return GatherBlocks(ctx, table, Blocks(list), input);
  };
}

auto AllGatherIntoTensorBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, output = call.output(), input = call.input()](CollectiveContext& ctx) {
    std::vector<ByteBlock> blocks;
    for (int i = 0; i < ctx.size(); ++i) {
      blocks.push_back({output.bytes() + i * input.nbytes(), input.nbytes()});
    }
    return GatherBlocks(ctx, table, std::move(blocks), input);
  };
}

auto GatherBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, list = Copy(call.outputs), input = call.input(),
          root = call.root](CollectiveContext& ctx) {
    ScheduleCall schedule{ctx, table, nullptr};
    schedule.root = root;
    schedule.own = {input.bytes(), input.nbytes()};
    schedule.blocks = Blocks(list);  // The root's outputs; empty elsewhere.
    return RunSchedule("gather", input.nbytes(), std::move(schedule));
  };
}

auto ScatterBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, list = Copy(call.inputs), output = call.output(),
          root = call.root](CollectiveContext& ctx) {
    ScheduleCall schedule{ctx, table, nullptr};
    schedule.root = root;
    schedule.own = {output.bytes(), output.nbytes()};
    schedule.blocks = Blocks(list);  // The root's inputs; empty elsewhere.
    return RunSchedule("scatter", output.nbytes(), std::move(schedule));
  };
}

// Reduce-scatter of `packed` (size x count elements) into `output`.
absl::Status ReduceScatterPacked(CollectiveContext& ctx, const AlgorithmTable& table,
                                 uint8_t* packed, const Tensor& output, const ReduceOp& op) {
  ScheduleCall schedule{ctx, table, nullptr};
  schedule.data = packed;
  schedule.count = output.numel();
  schedule.dtype = output.dtype();
  schedule.op = KernelOp(op.kind);
  PreScale(packed, schedule.count * ctx.size(), schedule.dtype, op);
  absl::Status status = RunSchedule("reduce_scatter", output.nbytes(), schedule);
  if (!status.ok()) return status;
  if (output.nbytes() > 0) {
    std::memcpy(output.data(), packed + ctx.rank() * output.nbytes(), output.nbytes());
  }
  PostScale(output.data(), schedule.count, schedule.dtype, op, ctx.size());
  return absl::OkStatus();
}

auto ReduceScatterBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, list = Copy(call.inputs), output = call.output(),
          op = call.op](CollectiveContext& ctx) {
    uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, output.nbytes() * list.size());
    PackTensors(list, packed);
    return ReduceScatterPacked(ctx, table, packed, output, op);
  };
}

auto ReduceScatterTensorBody(const Collective& call, const AlgorithmTable& table) {
  return
      [&table, input = call.input(), output = call.output(), op = call.op](CollectiveContext& ctx) {
        // The input is the caller's: reduce in a copy.
        uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, input.nbytes());
        if (input.nbytes() > 0) std::memcpy(packed, input.data(), input.nbytes());
        return ReduceScatterPacked(ctx, table, packed, output, op);
      };
}

// The all-to-all the table picks: send[i] goes to rank i, received[i] comes from it.
absl::Status ExchangeBlocks(CollectiveContext& ctx, const AlgorithmTable& table,
                            std::vector<ByteBlock> send, std::vector<ByteBlock> received) {
  uint64_t bytes = 0;
  for (const ByteBlock& block : send) bytes += block.bytes;
  ScheduleCall schedule{ctx, table, nullptr};
  schedule.blocks = std::move(send);
  schedule.received = std::move(received);
  return RunSchedule("all_to_all", bytes, std::move(schedule));
}

auto AllToAllBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, outs = Copy(call.outputs), ins = Copy(call.inputs)](CollectiveContext& ctx) {
    return ExchangeBlocks(ctx, table, Blocks(ins), Blocks(outs));
  };
}

auto AllToAllSingleBody(const Collective& call, const AlgorithmTable& table) {
  return [&table, output = call.output(), input = call.input(),
          out_splits = std::vector<int64_t>(call.output_splits.begin(), call.output_splits.end()),
          in_splits = std::vector<int64_t>(call.input_splits.begin(), call.input_splits.end())](
             CollectiveContext& ctx) {
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
    return ExchangeBlocks(ctx, table, blocks(input, in_splits), blocks(output, out_splits));
  };
}

MessageTag PointToPointTag(int tag) { return {MakeTag(kPointToPointOperationBase + tag, 0), 0}; }

}  // namespace

WorkPtr Collectives::Run(const Collective& call) {
  // Queued as `kind` (the signature peers compare) with the dtype and element count they check.
  auto queue = [&](CollectiveKind kind, DType dtype, int64_t count, auto body) {
    return Enqueue(kind, dtype, count, call.timeout, call.blocking, std::move(body));
  };
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
      return queue(call.kind, call.tensor().dtype(), call.tensor().numel(),
                   BroadcastBody(call, table_));
    case CollectiveKind::kReduce:
      return queue(call.kind, call.tensor().dtype(), call.tensor().numel(),
                   ReduceBody(call, table_));
    case CollectiveKind::kAllReduce:
      return queue(call.kind, call.tensor().dtype(), call.tensor().numel(),
                   AllReduceBody(call, table_));
    case CollectiveKind::kAllReduceCoalesced: {
      int64_t total = 0;
      for (const Tensor& t : call.outputs) total += t.numel();
      return queue(call.kind, call.outputs[0].dtype(), total,
                   AllReduceCoalescedBody(call, table_, total));
    }
    case CollectiveKind::kAllGather:
      return queue(call.kind, call.input().dtype(), call.input().numel(),
                   AllGatherBody(call, table_));
    case CollectiveKind::kAllGatherIntoTensor:
      return queue(CollectiveKind::kAllGather, call.input().dtype(), call.input().numel(),
                   AllGatherIntoTensorBody(call, table_));
    case CollectiveKind::kGather:
      return queue(call.kind, call.input().dtype(), call.input().numel(), GatherBody(call, table_));
    case CollectiveKind::kScatter:
      return queue(call.kind, call.output().dtype(), call.output().numel(),
                   ScatterBody(call, table_));
    case CollectiveKind::kReduceScatter:
      return queue(call.kind, call.output().dtype(), call.output().numel(),
                   ReduceScatterBody(call, table_));
    case CollectiveKind::kReduceScatterTensor:
      return queue(CollectiveKind::kReduceScatter, call.output().dtype(), call.output().numel(),
                   ReduceScatterTensorBody(call, table_));
    case CollectiveKind::kAllToAll:
      return queue(call.kind, call.inputs[0].dtype(), 0, AllToAllBody(call, table_));
    case CollectiveKind::kAllToAllSingle:
      return queue(CollectiveKind::kAllToAll, call.input().dtype(), 0,
                   AllToAllSingleBody(call, table_));
    case CollectiveKind::kBarrier:
      return queue(call.kind, DType::kUInt8, 0, BarrierBody(table_));
    // Point-to-point bypasses the queue: ordered per (peer, tag), independent of collectives.
    case CollectiveKind::kSend: {
      const Tensor& tensor = call.input();
      return transport_->Send(call.peer, PointToPointTag(call.tag),
                              {tensor.bytes(), tensor.nbytes()}, call.timeout);
    }
    case CollectiveKind::kRecv: {
      const Tensor& tensor = call.output();
      return transport_->Recv(call.peer, PointToPointTag(call.tag),
                              {tensor.bytes(), tensor.nbytes()}, call.timeout);
    }
    case CollectiveKind::kRecvAnySource: {
      const Tensor& tensor = call.output();
      return transport_->RecvFromAny(PointToPointTag(call.tag), {tensor.bytes(), tensor.nbytes()},
                                     call.timeout);
    }
  }
  // No default above: a kind added to the enum is a -Wswitch error until it has a case here.
  return Work::Finished(absl::UnimplementedError(absl::StrCat(
                            "the algorithm library has no schedule for ", call.name())),
                        std::string(call.name()), size());
}

}  // namespace plexus::executor
