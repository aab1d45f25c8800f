#include "base/work/work.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

TEST(WorkTest, WaitTimesOutWithClearMessageAndCanWaitAgain) {
  Work work("all_reduce", 4, 17);
  const absl::Time start = absl::Now();
  absl::Status status = work.Wait(absl::Milliseconds(50));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("all_reduce (sequence 17)"), std::string_view::npos) << status;
  EXPECT_NE(status.message().find("4 ranks"), std::string_view::npos) << status;
  EXPECT_FALSE(work.IsCompleted());
  EXPECT_EQ(work.status().code(), absl::StatusCode::kUnknown);

  EXPECT_TRUE(work.Complete(absl::OkStatus()));
  EXPECT_TRUE(work.Wait(absl::Milliseconds(1)).ok());
}

TEST(WorkTest, FirstCompletionWins) {
  Work work("broadcast", 2);
  EXPECT_TRUE(work.Complete(absl::UnavailableError("peer 1 lost")));
  EXPECT_FALSE(work.Complete(absl::OkStatus()));
  EXPECT_EQ(work.Wait(absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(work.status().message(), "peer 1 lost");
}

TEST(WorkTest, CallbackRegisteredBeforeCompletionFiresOnceInCompleterThread) {
  Work work("barrier", 3);
  std::atomic<int> calls{0};
  std::thread::id callback_thread;
  work.OnComplete([&](const absl::Status& status) {
    EXPECT_TRUE(status.ok());
    callback_thread = std::this_thread::get_id();
    ++calls;
  });
  EXPECT_EQ(calls.load(), 0);
  std::thread completer([&] { work.Complete(absl::OkStatus()); });
  const std::thread::id completer_id = completer.get_id();
  completer.join();
  work.Complete(absl::InternalError("late"));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(callback_thread, completer_id);
}

TEST(WorkTest, CallbackAfterCompletionRunsInlineWithFinalStatus) {
  WorkPtr work = Work::Finished(absl::AbortedError("aborted by user"), "send", 2);
  int calls = 0;
  work->OnComplete([&](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(WorkTest, CallbackMayUseTheWorkWithoutDeadlock) {
  auto work = std::make_shared<Work>("recv", 2);
  bool saw_completed = false;
  work->OnComplete([&](const absl::Status&) {
    saw_completed = work->IsCompleted() && work->stats().world_size == 2;
  });
  work->Complete(absl::OkStatus());
  EXPECT_TRUE(saw_completed);
}

TEST(WorkTest, ConcurrentWaitersAllSeeTheResult) {
  Work work("all_gather", 8);
  constexpr int kWaiters = 16;
  std::atomic<int> ok_count{0};
  std::atomic<int> started{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      ++started;
      if (work.Wait(absl::Seconds(30)).ok()) ++ok_count;
    });
  }
  // Completion may land before or after any waiter blocks; both must see OK.
  work.AddBytesSent(100);
  work.AddBytesReceived(300);
  work.Complete(absl::OkStatus());
  for (auto& t : waiters) t.join();
  EXPECT_EQ(ok_count.load(), kWaiters);
  Work::Stats stats = work.stats();
  EXPECT_EQ(stats.bytes_sent, 100);
  EXPECT_EQ(stats.bytes_received, 300);
  EXPECT_EQ(stats.world_size, 8);
  EXPECT_GE(stats.duration, absl::ZeroDuration());
}

TEST(WorkTest, DurationFreezesAtCompletion) {
  Work work("scatter", 2);
  work.Complete(absl::OkStatus());
  absl::Duration first = work.stats().duration;
  absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(work.stats().duration, first);
}

TEST(WorkTest, WaitAllReportsFirstErrorAndSharesDeadline) {
  std::vector<WorkPtr> works = {Work::Finished(absl::OkStatus()),
                                Work::Finished(absl::UnavailableError("rank 2 lost")),
                                std::make_shared<Work>("recv", 2)};
  absl::Status status = WaitAll(works, absl::Milliseconds(20));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  works.resize(1);
  works.push_back(std::make_shared<Work>("recv", 2));
  EXPECT_EQ(WaitAll(works, absl::Milliseconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(WorkTest, InfiniteAndNegativeTimeoutsAreSafe) {
  Work done("barrier", 2);
  done.Complete(absl::OkStatus());
  EXPECT_TRUE(done.Wait(absl::InfiniteDuration()).ok());
  Work pending("barrier", 2);
  EXPECT_EQ(pending.Wait(-absl::Seconds(1)).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(WorkTest, SourceRank) {
  Work work("recv_any_source", 4);
  EXPECT_EQ(work.source_rank(), -1);
  work.SetSourceRank(3);
  EXPECT_EQ(work.source_rank(), 3);
}

TEST(WorkTest, WaitOnStreamEnqueuesThroughTheHookWithoutBlocking) {
  Work work("all_reduce", 2, 7);
  int hooked_device = -1;
  void* hooked_stream = nullptr;
  work.SetStreamWaitHook([&](int device, void* stream) {
    hooked_device = device;
    hooked_stream = stream;
    return absl::OkStatus();
  });
  int marker = 0;
  EXPECT_TRUE(work.WaitOnStream(1, &marker).ok());  // Returns at once: the Work still runs.
  EXPECT_FALSE(work.IsCompleted());
  EXPECT_EQ(hooked_device, 1);
  EXPECT_EQ(hooked_stream, &marker);
  // Once complete there is nothing left to order: the status comes back, the hook is not used.
  work.Complete(absl::UnavailableError("rank 1 lost"));
  hooked_device = -1;
  EXPECT_EQ(work.WaitOnStream(0, nullptr).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(hooked_device, -1);
}

TEST(WorkTest, WaitOnStreamWithoutHookWaitsOnTheHost) {
  auto work = std::make_shared<Work>("broadcast", 2);
  std::thread completer([work] { work->Complete(absl::InternalError("boom")); });
  EXPECT_EQ(work->WaitOnStream(0, nullptr).code(), absl::StatusCode::kInternal);
  completer.join();
}

TEST(WorkTest, ListenersHearTheFinalStatusOnce) {
  struct Recorder : Work::Listener {
    void WorkCompleted(uint64_t token, const absl::Status& status) override {
      heard.push_back(absl::StrCat("listener ", token, " ", status.ToString()));
    }
    std::vector<std::string> heard;
  };
  auto recorder = std::make_shared<Recorder>();
  Work work("all_reduce", 2, 3);
  work.OnComplete([&](const absl::Status&) { recorder->heard.push_back("callback"); });
  work.Listen(recorder, 41);
  work.Listen(recorder, 43);  // A second listener runs among the callbacks, in order.
  work.Complete(absl::AbortedError("stop"));
  work.Complete(absl::OkStatus());
  work.Listen(recorder, 42);  // Already complete: told at once.
  EXPECT_THAT(recorder->heard,
              ::testing::ElementsAre("listener 41 ABORTED: stop", "callback",
                                     "listener 43 ABORTED: stop", "listener 42 ABORTED: stop"));
}

// A producer may subclass Work to run the operation in the waiting thread.
class RunsInWaiter : public Work {
 public:
  explicit RunsInWaiter(bool finish) : Work("barrier", 2), finish_(finish) {}
  int offers() const { return offers_; }

 private:
  void OfferToWaiter(absl::Duration) override {
    ++offers_;
    if (finish_) Complete(absl::OkStatus());
  }
  const bool finish_;
  int offers_ = 0;
};

TEST(WorkTest, OfferToWaiterRunsBeforeAWaitBlocksAndNotOnceComplete) {
  RunsInWaiter finishing(/*finish=*/true);
  EXPECT_TRUE(finishing.Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(finishing.Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(finishing.offers(), 1);

  RunsInWaiter idle(/*finish=*/false);
  const absl::Time start = absl::Now();
  EXPECT_EQ(idle.Wait(absl::Milliseconds(30)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_EQ(idle.offers(), 1);
}

TEST(WorkTest, AHookInstalledWhileOneRunsRunsNextWithinTheSameWait) {
  // A producer with stages: the first stage's hook installs the next stage's.
  auto work = std::make_shared<Work>("all_reduce", 2);
  std::vector<std::string> ran;
  Work* raw = work.get();
  work->SetWaitHook([&ran, raw](absl::Duration) {
    ran.push_back("host");
    raw->SetWaitHook([&ran, raw](absl::Duration) {
      ran.push_back("copy back");
      raw->Complete(absl::OkStatus());
    });
  });
  EXPECT_TRUE(work->Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(ran, (std::vector<std::string>{"host", "copy back"}));
}

TEST(WorkTest, AHookThatDoesNotFinishIsKeptForTheNextWait) {
  auto work = std::make_shared<Work>("all_reduce", 2);
  int calls = 0;
  work->SetWaitHook([&calls](absl::Duration) { ++calls; });
  EXPECT_EQ(work->Wait(absl::Milliseconds(5)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(work->Wait(absl::Milliseconds(5)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace plexus
