// Conformance: several operations in flight, issue order, subgroups, stats, and a large tensor.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/reference.h"

namespace plexus::conformance {
namespace {

class SemanticsTest : public ::testing::TestWithParam<int> {};

TEST_P(SemanticsTest, ManyOperationsInFlight) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    constexpr int kInFlight = 16;
    std::vector<Buffer> buffers;
    std::vector<absl::StatusOr<WorkPtr>> works;
    for (int i = 0; i < kInFlight; ++i) {
      buffers.push_back(
          MakeInput(DType::kFloat32, ReduceOpKind::kSum, group.rank(), 1000 + i * 997, i));
    }
    for (int i = 0; i < kInFlight; ++i) {
      Buffer& b = buffers[i];
      if (i % 4 == 3) {
        BroadcastOptions options;
        options.root_rank = i % group.size();
        works.push_back(
            group.Broadcast(DeviceTensor(b.data(), DType::kFloat32, b.count()), options));
      } else {
        works.push_back(group.AllReduce(DeviceTensor(b.data(), DType::kFloat32, b.count())));
      }
    }
    for (int i = kInFlight - 1; i >= 0; --i) {  // Waiting out of order is fine.
      if (!check.Ran(absl::StrCat("op ", i), works[i])) continue;
      std::vector<double> expected;
      for (int64_t e = 0; e < buffers[i].count(); ++e) {
        expected.push_back(
            i % 4 == 3 ? InputValue(DType::kFloat32, ReduceOpKind::kSum, i % group.size(), e, i)
                       : ReducedValue(DType::kFloat32, ReduceOpKind::kSum, group.size(), e, i));
      }
      std::string diff = Compare(buffers[i], expected, ReduceOpKind::kSum);
      if (!diff.empty()) check.Fail("op ", i, ": ", diff);
    }
  });
}

// Blocking calls (options.blocking) interleaved with ones that return at once, and the other
// way round on the other ranks: every blocking call returns finished, every result is right.
TEST_P(SemanticsTest, BlockingCallsMixWithOnesThatReturnAtOnce) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    constexpr int kOps = 12;
    const int n = group.size();
    std::vector<Buffer> inputs, outputs;
    std::vector<absl::StatusOr<WorkPtr>> works;
    for (int i = 0; i < kOps; ++i) {
      const int64_t count = i % 3 == 0 ? 5000 + i : 3 + i;
      inputs.push_back(MakeInput(DType::kFloat32, ReduceOpKind::kSum, group.rank(), count, i));
      outputs.push_back(Buffer(DType::kFloat32, i % 4 == 2 ? count * n : 0));
    }
    for (int i = 0; i < kOps; ++i) {
      const bool blocking = (i + group.rank()) % 2 == 0;
      Buffer& in = inputs[i];
      const Tensor tensor = DeviceTensor(in.data(), DType::kFloat32, in.count());
      absl::StatusOr<WorkPtr> work;
      if (i % 4 == 1) {
        BroadcastOptions options;
        options.root_rank = i % n;
        options.blocking = blocking;
        work = group.Broadcast(tensor, options);
      } else if (i % 4 == 2) {
        AllGatherOptions options;
        options.blocking = blocking;
        work = group.AllGatherIntoTensor(
            DeviceTensor(outputs[i].data(), DType::kFloat32, outputs[i].count()), tensor, options);
      } else if (i % 4 == 3) {
        BarrierOptions options;
        options.blocking = blocking;
        work = group.Barrier(options);
      } else {
        AllReduceOptions options;
        options.blocking = blocking;
        work = group.AllReduce(tensor, options);
      }
      if (blocking && work.ok() && !(*work)->IsCompleted()) {
        check.Fail("op ", i, " was blocking but returned before it finished");
      }
      works.push_back(std::move(work));
    }
    for (int i = 0; i < kOps; ++i) {
      if (!check.Ran(absl::StrCat("op ", i), works[i]) || i % 4 == 3) continue;
      std::vector<double> expected;
      const Buffer& got = i % 4 == 2 ? outputs[i] : inputs[i];
      for (int64_t e = 0; e < got.count(); ++e) {
        const int64_t count = inputs[i].count();
        expected.push_back(i % 4 == 1 ? InputValue(DType::kFloat32, ReduceOpKind::kSum, i % n, e, i)
                           : i % 4 == 2
                               ? InputValue(DType::kFloat32, ReduceOpKind::kSum,
                                            static_cast<int>(e / count), e % count, i)
                               : ReducedValue(DType::kFloat32, ReduceOpKind::kSum, n, e, i));
      }
      std::string diff = Compare(got, expected, ReduceOpKind::kSum);
      if (!diff.empty()) check.Fail("op ", i, ": ", diff);
    }
  });
}

TEST_P(SemanticsTest, SubgroupsRunIndependently) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    std::vector<int> evens, odds;
    for (int r = 0; r < group.size(); ++r) (r % 2 == 0 ? evens : odds).push_back(r);
    auto even_group = group.NewGroup(evens);
    absl::StatusOr<std::shared_ptr<ProcessGroup>> odd_group = std::shared_ptr<ProcessGroup>();
    if (!odds.empty()) odd_group = group.NewGroup(odds);
    if (!even_group.ok() || !odd_group.ok()) {
      check.Fail("new_group failed");
      return;
    }
    auto mine = group.rank() % 2 == 0 ? *even_group : *odd_group;
    const std::vector<int>& members = group.rank() % 2 == 0 ? evens : odds;
    Buffer value(DType::kInt64, 1);
    value.Set(0, group.rank() + 1);
    if (check.Ran("subgroup all_reduce",
                  mine->AllReduce(DeviceTensor(value.data(), DType::kInt64, 1)))) {
      int64_t expected = 0;
      for (int r : members) expected += r + 1;
      if (value.Get(0) != expected)
        check.Fail("subgroup sum ", value.Get(0), " expected ", expected);
    }
    // The world still works after the subgroups.
    Buffer world_value(DType::kInt64, 1);
    world_value.Set(0, 1);
    if (check.Ran("world all_reduce",
                  group.AllReduce(DeviceTensor(world_value.data(), DType::kInt64, 1))) &&
        world_value.Get(0) != group.size()) {
      check.Fail("world sum ", world_value.Get(0));
    }
    (void)mine->Shutdown(absl::Seconds(60));
  });
}

// MPI_Comm_split on every backend: colours by parity, keys reverse the order, and in worlds of
// 3+ the last rank passes no colour and gets no group.
TEST_P(SemanticsTest, SplitFormsGroupsByColourOrderedByKey) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    const int n = group.size(), r = group.rank();
    auto colour_of = [n](int p) { return n >= 3 && p == n - 1 ? ProcessGroup::kNoColor : p % 2; };
    auto split = group.Split(colour_of(r), -r);
    if (!split.ok()) {
      check.Fail("split: ", split.status().ToString());
      return;
    }
    if (colour_of(r) < 0) {
      if (*split != nullptr) check.Fail("a rank without a colour got a group");
      return;
    }
    std::vector<int> members;  // Same colour, by key: descending rank.
    for (int p = n - 1; p >= 0; --p) {
      if (colour_of(p) == colour_of(r)) members.push_back(p);
    }
    const auto position = std::find(members.begin(), members.end(), r) - members.begin();
    if (*split == nullptr || (*split)->size() != static_cast<int>(members.size()) ||
        (*split)->rank() != position) {
      check.Fail("rank ", r, ": wrong split group");
      return;
    }
    Buffer value(DType::kInt64, 1);
    value.Set(0, r + 1);
    if (check.Ran("split all_reduce",
                  (*split)->AllReduce(DeviceTensor(value.data(), DType::kInt64, 1)))) {
      int64_t expected = 0;
      for (int p : members) expected += p + 1;
      if (value.Get(0) != expected) check.Fail("split sum ", value.Get(0), " expected ", expected);
    }
    (void)(*split)->Shutdown(absl::Seconds(60));
  });
}

// A Work completes by itself: callbacks fire although nobody calls Wait() (what futures and
// callback chains rely on).
TEST_P(SemanticsTest, WorksCompleteWithoutWait) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      int count = 0;
      absl::Status first;
    };
    auto done = std::make_shared<Done>();
    auto on_complete = [done](const absl::Status& status) {
      std::lock_guard<std::mutex> lock(done->mu);
      if (done->first.ok()) done->first = status;
      ++done->count;
      done->cv.notify_all();
    };
    const int n = group.size();
    const int me = group.rank();
    Buffer sent(DType::kInt32, 1), received(DType::kInt32, 1), data(DType::kFloat32, 1000);
    sent.Set(0, me + 100);
    received.Set(0, -1);
    for (int64_t i = 0; i < data.count(); ++i) data.Set(i, 1.0);
    std::vector<absl::StatusOr<WorkPtr>> works;
    if (n > 1) {  // Odd ranks receive first, even ranks send first (see BarrierAndPointToPoint).
      auto recv = [&] {
        return group.Recv(DeviceTensor(received.data(), DType::kInt32, 1), (me + n - 1) % n);
      };
      auto send = [&] {
        return group.Send(DeviceTensor(sent.data(), DType::kInt32, 1), (me + 1) % n);
      };
      works.push_back(me % 2 == 1 ? recv() : send());
      works.push_back(me % 2 == 1 ? send() : recv());
    }
    works.push_back(group.AllReduce(DeviceTensor(data.data(), DType::kFloat32, data.count())));
    for (auto& work : works) {
      if (!work.ok()) {
        check.Fail("rejected: ", work.status().ToString());
        return;
      }
      (*work)->OnComplete(on_complete);
    }
    std::unique_lock<std::mutex> lock(done->mu);
    if (!done->cv.wait_for(lock, std::chrono::seconds(60),
                           [&] { return done->count == static_cast<int>(works.size()); })) {
      check.Fail(done->count, " of ", works.size(), " works completed without Wait()");
      lock.unlock();
      for (auto& work : works) (void)(*work)->Wait(absl::Seconds(60));  // Do not leave them.
      return;
    }
    if (!done->first.ok()) check.Fail("completion: ", done->first.ToString());
    if (n > 1 && received.Get(0) != (me + n - 1) % n + 100) {
      check.Fail("recv gave ", received.Get(0));
    }
    if (data.Get(0) != n) check.Fail("all_reduce gave ", data.Get(0));
  });
}

// A user's completion callback issues the group's next collective, and every other one waits
// for it before returning: no deadlock (the callback thread is not one the collectives need)
// and no reordering (broadcasts with moving roots between all_reduces would mix data or fail
// the signature check if ranks ran them in different orders).
class CallbackChain : public std::enable_shared_from_this<CallbackChain> {
 public:
  static constexpr int kSteps = 12;

  CallbackChain(ProcessGroup& group, Checker& check) : group_(group), check_(check) {
    for (int i = 0; i < kSteps; ++i) buffers_.emplace_back(DType::kFloat32, 257 + i);
  }

  // Issues step `i`; its callback checks the result and issues step i + 1.
  void Issue(int i) {
    Buffer& b = buffers_[i];
    const int n = group_.size();
    const int root = i % n;
    absl::StatusOr<WorkPtr> work;
    if (IsBroadcast(i)) {
      for (int64_t k = 0; k < b.count(); ++k) b.Set(k, group_.rank() == root ? 1000 * i + k : -1);
      BroadcastOptions options;
      options.root_rank = root;
      work = group_.Broadcast(DeviceTensor(b.data(), DType::kFloat32, b.count()), options);
    } else {
      for (int64_t k = 0; k < b.count(); ++k) b.Set(k, (group_.rank() + 1) * (i + 1));
      work = group_.AllReduce(DeviceTensor(b.data(), DType::kFloat32, b.count()));
    }
    if (!work.ok()) return Finish(absl::StrCat("step ", i, " refused: ", work.status().ToString()));
    Record(*work);
    auto self = shared_from_this();
    (*work)->OnCompleteMayBlock([self, i](const absl::Status& status) { self->Done(i, status); });
  }

  // Waits for the last step (or a failure); waits out whatever was issued before returning.
  void Await() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(120), [&] { return finished_; })) {
      check_.Fail("callback chain stalled after ", issued_.size(), " of ", kSteps, " steps");
    }
    std::vector<WorkPtr> issued = issued_;
    lock.unlock();
    for (const WorkPtr& work : issued) (void)work->Wait(absl::Seconds(60));
    lock.lock();
    // Every callback has returned once the last one finished; a stalled chain may still run.
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return callbacks_running_ == 0; });
  }

 private:
  static bool IsBroadcast(int i) { return i % 3 == 2; }

  void Done(int i, const absl::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++callbacks_running_;
    }
    if (!status.ok()) {
      Finish(absl::StrCat("step ", i, ": ", status.ToString()));
    } else {
      CheckStep(i);
      if (i + 1 == kSteps) {
        Finish("");
      } else {
        Issue(i + 1);
        // Every other callback blocks on the collective it issued.
        if (i % 2 == 0) {
          WorkPtr next = Last();
          absl::Status waited = next->Wait(absl::Seconds(60));
          if (!waited.ok())
            Finish(absl::StrCat("waiting in step ", i, "'s callback: ", waited.ToString()));
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    --callbacks_running_;
    cv_.notify_all();
  }

  void CheckStep(int i) {
    const Buffer& b = buffers_[i];
    const int n = group_.size();
    for (int64_t k = 0; k < b.count(); ++k) {
      const double want = IsBroadcast(i) ? 1000.0 * i + k : (i + 1) * n * (n + 1) / 2.0;
      if (b.Get(k) != want) {
        std::lock_guard<std::mutex> lock(mu_);
        check_.Fail("step ", i, " element ", k, " is ", b.Get(k), ", want ", want);
        return;
      }
    }
  }

  void Record(const WorkPtr& work) {
    std::lock_guard<std::mutex> lock(mu_);
    issued_.push_back(work);
  }
  WorkPtr Last() {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_.back();
  }
  void Finish(const std::string& failure) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure.empty()) check_.Fail(failure);
    finished_ = true;
    cv_.notify_all();
  }

  ProcessGroup& group_;
  Checker& check_;
  std::vector<Buffer> buffers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WorkPtr> issued_;
  int callbacks_running_ = 0;
  bool finished_ = false;
};

TEST_P(SemanticsTest, CallbackIssuesTheNextCollective) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    auto chain = std::make_shared<CallbackChain>(group, check);
    chain->Issue(0);
    chain->Await();
  });
}

TEST_P(SemanticsTest, LargeTensorAndStats) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    const int64_t count = 1 << 20;
    Buffer data = MakeInput(DType::kFloat32, ReduceOpKind::kSum, group.rank(), count);
    auto work = group.AllReduce(DeviceTensor(data.data(), DType::kFloat32, count));
    if (!check.Ran("all_reduce 1M", work)) return;
    std::vector<double> expected(count);
    for (int64_t i = 0; i < count; ++i) {
      expected[i] = ReducedValue(DType::kFloat32, ReduceOpKind::kSum, group.size(), i);
    }
    std::string diff = Compare(data, expected, ReduceOpKind::kSum);
    if (!diff.empty()) check.Fail("all_reduce 1M: ", diff);
    const Work::Stats stats = (*work)->stats();
    const int n = group.size();
    // Ring and the one-host algorithms: each rank sends and receives at most 2 (n - 1) / n of
    // the buffer; across "hosts" (--ranks_per_host) a hierarchy's leaders may also take their
    // host's input and hand back the result (at most one buffer more).
    const int64_t bound = (RanksPerHost() > 0 ? 3 : 2) * count * 4;
    if (n > 1 && (stats.bytes_sent <= 0 || stats.bytes_sent > bound || stats.bytes_received <= 0 ||
                  stats.bytes_received > bound)) {
      check.Fail("stats: sent ", stats.bytes_sent, " received ", stats.bytes_received);
    }
    if (stats.world_size != n) check.Fail("stats world size ", stats.world_size);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SemanticsTest, ::testing::ValuesIn(WorldSizes()),
                         [](const auto& info) { return absl::StrCat("world", info.param); });

}  // namespace
}  // namespace plexus::conformance
