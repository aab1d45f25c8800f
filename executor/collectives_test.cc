// Who runs a queued collective: the thread that waits on it, or the worker when nobody does.
#include "executor/collectives.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "base/work/test_signal.h"
#include "gtest/gtest.h"

namespace plexus::executor {

using algorithms::AlgorithmTable;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;

namespace {

// A group of one: the bodies below never move bytes.
class SoloTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  WorkPtr Send(int, MessageTag, absl::Span<const uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("solo"), "send", 1);
  }
  WorkPtr Recv(int, MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("solo"), "recv", 1);
  }
  WorkPtr RecvFromAny(MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("solo"), "recv", 1);
  }
  void AbortOperation(uint64_t, absl::Status) override {}
  void Abort(absl::Status) override {}
};

// Submits a collective with timeout `own`, waits on it for `wait`, and returns the thread it
// ran on (the default id if the wait failed).
std::thread::id SubmitAndWait(Collectives& collectives, absl::Duration own, absl::Duration wait) {
  std::thread::id ran_on;
  WorkPtr work =
      collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, own, [&](CollectiveContext&) {
        ran_on = std::this_thread::get_id();
        return absl::OkStatus();
      });
  if (!work->Wait(wait).ok()) return std::thread::id();
  return ran_on;
}

TEST(CollectivesTest, TheWaitingThreadRunsTheCollective) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  // The worker may take one only once its grace for a waiter ran out: this thread was
  // descheduled between Submit and Wait (the first, cold iteration under a sanitizer did).
  int on_waiter = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t unclaimed = collectives.unclaimed_after_grace();
    const std::thread::id ran_on = SubmitAndWait(collectives, absl::Seconds(30), absl::Seconds(30));
    if (ran_on == std::this_thread::get_id()) {
      ++on_waiter;
    } else {
      EXPECT_EQ(collectives.unclaimed_after_grace(), unclaimed + 1)
          << "iteration " << i << ": the worker took a collective within its waiter's grace";
    }
  }
  EXPECT_GE(on_waiter, 80);
}

// Submits a collective, waits (without waiting on its Work) until it has run, and returns the
// thread it ran on; the default id if it did not run.
std::thread::id RunUnwaited(Collectives& collectives) {
  absl::Notification ran;
  std::thread::id ran_on;
  WorkPtr work = collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30),
                                    [&](CollectiveContext&) {
                                      ran_on = std::this_thread::get_id();
                                      ran.Notify();
                                      return absl::OkStatus();
                                    });
  if (!ran.WaitForNotificationWithTimeout(absl::Seconds(30))) return std::thread::id();
  // The Work's completion (not only the notification, whose abseil internals ThreadSanitizer
  // cannot see into) orders the worker's write before this read.
  if (!work->Wait(absl::Seconds(30)).ok()) return std::thread::id();
  return ran_on;
}

TEST(CollectivesTest, ACollectiveNobodyWaitsOnStillRuns) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  const std::thread::id ran_on = RunUnwaited(collectives);
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// While waiting threads run every collective back to back, the worker (which must still start
// one that nobody waits on) looks for one less and less often instead of every millisecond;
// a collective nobody waits on, issued right after such a stream, still starts on the worker.
TEST(CollectivesTest, WhileWaitersRunEveryCollectiveTheWorkerLooksLessOften) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  auto nothing = [](CollectiveContext&) { return absl::OkStatus(); };
  const absl::Duration stream = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  while (absl::Now() - start < stream) {
    ASSERT_TRUE(
        collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30), nothing)
            ->Wait(absl::Seconds(30))
            .ok());
  }
  // Every millisecond would be ~300 looks; doubling up to kLongestWorkerLook makes ~40.
  EXPECT_LT(collectives.worker_looks(), 100u);
  EXPECT_GT(collectives.worker_looks(), 0u);

  const absl::Time issued = absl::Now();
  const std::thread::id ran_on = RunUnwaited(collectives);
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // kLongestWorkerLook + kWaiterGrace, with room for a loaded machine.
  EXPECT_LT(absl::Now() - issued, absl::Seconds(1));
}

// Waiting threads running collectives that each outlast the worker's longest look: issuing the
// next one does not wake the worker each time (a wake-up that preempts the issuing rank on a
// crowded host); it goes on looking on its timer.
TEST(CollectivesTest, IssuingWhileWaitersRunLongCollectivesLeavesTheWorkerOnItsTimer) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  auto slow = [](CollectiveContext&) {
    absl::SleepFor(kLongestWorkerLook + absl::Milliseconds(4));
    return absl::OkStatus();
  };
  constexpr int kCalls = 30;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(
        collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30), slow)
            ->Wait(absl::Seconds(30))
            .ok());
  }
  // The first issue wakes it (it slept untimed, nothing having been issued yet); a preempted
  // test thread may make the odd other one.
  EXPECT_LE(collectives.worker_woken_at_issue(), 3u);
  EXPECT_LT(collectives.unclaimed_after_grace(), 3u);
}

// A wait shorter than the collective's own timeout cannot run it (it might outlast the wait):
// the worker takes it at once, not after its grace for a waiting thread (a millisecond per
// call before).
TEST(CollectivesTest, AWaitShorterThanTheCollectiveHandsItToTheWorkerAtOnce) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  constexpr int kCalls = 100;
  for (int i = 0; i < kCalls; ++i) {
    const std::thread::id ran_on = SubmitAndWait(collectives, absl::Minutes(30), absl::Seconds(30));
    ASSERT_NE(ran_on, std::thread::id()) << "call " << i;
    EXPECT_NE(ran_on, std::this_thread::get_id()) << "call " << i;
  }
  // Before, about every other call waited out the grace; a preempted test thread may still
  // make the odd one do so.
  EXPECT_LT(collectives.unclaimed_after_grace(), kCalls / 10);
}

TEST(CollectivesTest, QueuedCollectivesRunInIssueOrderWhoeverRunsThem) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  std::mutex mu;
  std::vector<int> order;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 50; ++i) {
    works.push_back(collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0,
                                       absl::Seconds(30), [&, i](CollectiveContext&) {
                                         std::lock_guard<std::mutex> lock(mu);
                                         order.push_back(i);
                                         return absl::OkStatus();
                                       }));
    if (i % 7 == 3) {
      ASSERT_TRUE(works.back()->Wait(absl::Seconds(30)).ok());
    }
  }
  ASSERT_TRUE(WaitAll(works, absl::Seconds(30)).ok());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

// A blocking collective with nothing queued runs before the call returns (PREMUL_SUM's scaling
// shows it ran), and the Work it returns is finished; behind a queued one it waits its turn.
TEST(CollectivesTest, ABlockingCollectiveRunsBeforeItReturnsAndKeepsIssueOrder) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  std::vector<float> data = {1, 2, 3, 4};
  const Tensor tensor = Tensor::Flat(data.data(), DType::kFloat32, 4);
  AllReduceOptions options;
  options.op = ReduceOp::PremulSum(2.0);
  options.timeout = absl::Seconds(30);
  options.blocking = true;
  for (int i = 0; i < 10; ++i) {
    WorkPtr work = collectives.Run(
        Collective::InPlace(CollectiveKind::kAllReduce, {&tensor, 1}).With(options));
    ASSERT_TRUE(work->IsCompleted()) << "iteration " << i;
    ASSERT_TRUE(work->status().ok()) << work->status();
  }
  EXPECT_EQ(data[3], 4.0f * 1024);
  BarrierOptions barrier;
  barrier.blocking = true;
  EXPECT_TRUE(collectives.Run(Collective().With(barrier))->IsCompleted());

  // Behind a collective still running, a blocking one is queued and runs after it.
  absl::Notification release;
  std::vector<float> seen;
  WorkPtr first = collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30),
                                     [&](CollectiveContext&) {
                                       release.WaitForNotification();
                                       seen = data;
                                       return absl::OkStatus();
                                     });
  std::thread runner([&] { EXPECT_TRUE(first->Wait(absl::Seconds(30)).ok()); });
  WorkPtr second =
      collectives.Run(Collective::InPlace(CollectiveKind::kAllReduce, {&tensor, 1}).With(options));
  EXPECT_FALSE(second->IsCompleted());
  release.Notify();
  ASSERT_TRUE(second->Wait(absl::Seconds(30)).ok());
  runner.join();
  EXPECT_EQ(seen[3], 4.0f * 1024) << "the blocking collective ran before the one issued first";
  EXPECT_EQ(data[3], 4.0f * 2048);
}

// Two ranks whose every send and receive fails: a blocking collective run in place returns a
// finished Work with the failure, and the next call still runs.
class BrokenPairTransport : public SoloTransport {
 public:
  int size() const override { return 2; }
  WorkPtr Send(int, MessageTag, absl::Span<const uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnavailableError("the wire is cut"), "send", 2);
  }
  WorkPtr Recv(int, MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnavailableError("the wire is cut"), "recv", 2);
  }
};

TEST(CollectivesTest, ABlockingCollectiveThatFailsReturnsItsFailure) {
  Collectives collectives(std::make_shared<BrokenPairTransport>(), AlgorithmTable::Default());
  std::vector<float> data(16, 1.0f);
  AllReduceOptions options;
  options.timeout = absl::Seconds(30);
  options.blocking = true;
  for (int i = 0; i < 2; ++i) {
    const Tensor tensor = Tensor::Flat(data.data(), DType::kFloat32, 16);
    WorkPtr work = collectives.Run(
        Collective::InPlace(CollectiveKind::kAllReduce, {&tensor, 1}).With(options));
    ASSERT_TRUE(work->IsCompleted());
    EXPECT_EQ(work->status().code(), absl::StatusCode::kUnavailable) << work->status();
    EXPECT_NE(work->status().message().find("the wire is cut"), absl::string_view::npos)
        << work->status();
  }
}

// A Work outlives its Collectives: queued ones fail Aborted when it goes, and waiting on any
// of them afterwards answers at once. A body's captures are released once it has run.
TEST(CollectivesTest, WorksOutliveTheirCollectivesAndBodiesReleaseTheirCaptures) {
  auto captured = std::make_shared<int>(7);
  std::weak_ptr<int> watch = captured;
  WorkPtr ran, queued;
  {
    Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
    absl::Notification release;
    ran = collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30),
                             [&release, captured = std::move(captured)](CollectiveContext&) {
                               release.WaitForNotification();
                               return absl::OkStatus();
                             });
    queued = collectives.Submit(CollectiveKind::kBarrier, DType::kUInt8, 0, absl::Seconds(30),
                                [](CollectiveContext&) { return absl::OkStatus(); });
    std::thread waiter([&] { EXPECT_TRUE(ran->Wait(absl::Seconds(30)).ok()); });
    release.Notify();
    waiter.join();
    EXPECT_TRUE(watch.expired()) << "the body ran but its captures live on with the Work";
  }
  EXPECT_TRUE(ran->Wait(absl::Seconds(1)).ok());
  const absl::Status status = queued->Wait(absl::Seconds(1));
  EXPECT_TRUE(status.ok() || absl::IsAborted(status)) << status;
}

// A user's completion callback that issues a collective and waits for it, as torch's PowerSGD
// hook does inside a Future callback. `wait_like_torch`: it waits for the nested collective's
// own callback (torch's Future::wait) rather than on its Work. `waited`: the first collective
// is run by a thread waiting on it (else by the worker). Returns whether the nested collective
// completed within the callback.
bool NestedCollectiveCompletes(Collectives& collectives, bool wait_like_torch, bool waited) {
  auto nothing = [](CollectiveContext&) { return absl::OkStatus(); };
  auto nested_done = std::make_shared<bool>(false);
  auto callback_ended = std::make_shared<TestSignal>();
  WorkPtr first = collectives.Submit(CollectiveKind::kAllReduce, DType::kFloat32, 4,
                                     absl::Seconds(30), nothing);
  first->OnCompleteMayBlock(
      [&collectives, nothing, wait_like_torch, nested_done, callback_ended](const absl::Status&) {
        WorkPtr nested = collectives.Submit(CollectiveKind::kAllReduce, DType::kFloat32, 4,
                                            absl::Seconds(30), nothing);
        if (wait_like_torch) {
          auto future = std::make_shared<TestSignal>();
          nested->OnCompleteMayBlock([future](const absl::Status&) { future->Notify(); });
          *nested_done = future->WaitFor(absl::Seconds(10));
        } else {
          *nested_done = nested->Wait(absl::Seconds(10)).ok();
        }
        callback_ended->Notify();
      });
  if (waited && !first->Wait(absl::Seconds(30)).ok()) return false;
  if (!callback_ended->WaitFor(absl::Seconds(60))) return false;
  return *nested_done;
}

TEST(CollectivesTest, ACallbackWaitingForACollectiveItIssuedCompletes) {
  Collectives collectives(std::make_shared<SoloTransport>(), AlgorithmTable::Default());
  for (bool wait_like_torch : {false, true}) {
    for (bool waited : {false, true}) {
      for (int i = 0; i < 5; ++i) {
        EXPECT_TRUE(NestedCollectiveCompletes(collectives, wait_like_torch, waited))
            << (wait_like_torch ? "waiting for its callback" : "waiting on its Work") << ", "
            << (waited ? "run by a waiting thread" : "run by the worker") << ", round " << i;
      }
    }
  }
}

}  // namespace
}  // namespace plexus::executor
