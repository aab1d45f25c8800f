// Callbacks that may block leave threads in a ProgressScope, and never wait for themselves.
#include "base/work/callback_runner.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/core/mutex.h"
#include "base/work/test_signal.h"
#include "base/work/work.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

TEST(CallbackRunnerTest, MayBlockCallbacksRunInlineOutsideAProgressScope) {
  Work work("all_reduce", 2);
  std::thread::id ran_on;
  work.OnCompleteMayBlock([&](const absl::Status&) { ran_on = std::this_thread::get_id(); });
  work.Complete(absl::OkStatus());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(CallbackRunnerTest, InAProgressScopeMayBlockCallbacksRunElsewhereInOrder) {
  Work work("all_reduce", 2);
  std::thread::id bookkeeping_on;
  Mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread::id> user_on;
  TestSignal done;
  work.OnComplete([&](const absl::Status&) { bookkeeping_on = std::this_thread::get_id(); });
  for (const char* name : {"first", "second", "third"}) {
    work.OnCompleteMayBlock([&, name](const absl::Status& status) {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
      MutexLock lock(mu);
      order.push_back(name);
      user_on.push_back(std::this_thread::get_id());
      if (order.size() == 3) done.Notify();
    });
  }
  {
    ProgressScope progress;
    work.Complete(absl::UnavailableError("rank 1 lost"));
  }
  ASSERT_TRUE(done.WaitFor(absl::Seconds(30)));
  EXPECT_EQ(bookkeeping_on, std::this_thread::get_id());
  MutexLock lock(mu);
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "third"}));
  for (const std::thread::id& id : user_on) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(CallbackRunnerTest, RegisteringOnAFinishedWorkInAProgressScopeRunsElsewhere) {
  WorkPtr work = Work::Finished(absl::OkStatus(), "barrier", 2);
  TestSignal ran;
  std::thread::id ran_on;
  {
    ProgressScope progress;
    work->OnCompleteMayBlock([&](const absl::Status&) {
      ran_on = std::this_thread::get_id();
      ran.Notify();
    });
  }
  ASSERT_TRUE(ran.WaitFor(absl::Seconds(30)));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// As torch's Future: a callback of one Work waits, without a Work::Wait, for a second Work's
// callback. Both Works complete in a ProgressScope, so both callbacks go to callback threads:
// the second must not queue behind the first for ever.
TEST(CallbackRunnerTest, ACallbackWaitingForAnotherWorksCallbackIsNotStuckBehindIt) {
  for (int round = 0; round < 5; ++round) {
    auto outer = std::make_shared<Work>("all_reduce", 2);
    auto inner = std::make_shared<Work>("all_reduce", 2);
    auto inner_callback_ran = std::make_shared<TestSignal>();
    auto outer_done = std::make_shared<TestSignal>();
    bool inner_seen = false;
    inner->OnCompleteMayBlock(
        [inner_callback_ran](const absl::Status&) { inner_callback_ran->Notify(); });
    outer->OnCompleteMayBlock([&, inner_callback_ran, outer_done](const absl::Status&) {
      inner_seen = inner_callback_ran->WaitFor(absl::Seconds(30));
      outer_done->Notify();
    });
    {
      ProgressScope progress;
      outer->Complete(absl::OkStatus());
      inner->Complete(absl::OkStatus());
    }
    ASSERT_TRUE(outer_done->WaitFor(absl::Seconds(60))) << round;
    EXPECT_TRUE(inner_seen) << "round " << round;
  }
  EXPECT_GE(CallbackThreadsStarted(), 2);
}

TEST(CallbackRunnerTest, ScopesNest) {
  EXPECT_FALSE(ProgressScope::Active());
  {
    ProgressScope outer;
    {
      ProgressScope inner;
      EXPECT_TRUE(ProgressScope::Active());
    }
    EXPECT_TRUE(ProgressScope::Active());
  }
  EXPECT_FALSE(ProgressScope::Active());
}

}  // namespace
}  // namespace plexus
