// ArenaOrder: turns run one at a time in turn order whatever order their callers arrive in,
// and a turn that cannot come ends by its deadline or when its epoch is abandoned.
#include "frontend/elastic/arena_order.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus::elastic {
namespace {

const std::function<bool()> kNever = [] { return false; };

TEST(ArenaOrderTest, TurnsRunOneAtATimeInTurnOrderWhateverOrderTheyArrive) {
  ArenaOrder order;
  constexpr int kTurns = 24;
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < kTurns; ++i) {
    const int turn = kTurns - 1 - i;  // The last turn arrives first.
    callers.emplace_back([&, turn] {
      std::function<absl::Status()> body = [&, turn] {
        if (inside.fetch_add(1) != 0) overlapped = true;
        {
          std::lock_guard<std::mutex> lock(mu);
          ran.push_back(turn);
        }
        inside.fetch_sub(1);
        return turn == 5 ? absl::InternalError("five") : absl::OkStatus();
      };
      const absl::Status status =
          order.Run(/*epoch=*/3, turn, absl::Now() + absl::Seconds(30), kNever, body);
      EXPECT_EQ(status.ok(), turn != 5) << turn << ": " << status;  // Each gets its own status.
    });
  }
  for (std::thread& t : callers) t.join();
  std::vector<int> want(kTurns);
  for (int i = 0; i < kTurns; ++i) want[i] = i;
  EXPECT_EQ(ran, want);
  EXPECT_FALSE(overlapped);
}

TEST(ArenaOrderTest, ARoundHoldsItsConsecutiveTurnsAndTheNextTurnFollowsIt) {
  ArenaOrder order;
  std::mutex mu;
  std::vector<int> ran;
  // Turn 0, a round holding turns 1-3, then turns 4 and 5; they arrive last first.
  const std::vector<std::pair<int, int>> entries = {{5, 1}, {4, 1}, {1, 3}, {0, 1}};
  std::vector<std::thread> callers;
  for (const auto& [turn, turns] : entries) {
    callers.emplace_back([&, turn = turn, turns = turns] {
      std::function<absl::Status()> body = [&, turn] {
        std::lock_guard<std::mutex> lock(mu);
        ran.push_back(turn);
        return absl::OkStatus();
      };
      EXPECT_TRUE(
          order.Run(/*epoch=*/0, turn, absl::Now() + absl::Seconds(30), kNever, body, turns).ok())
          << turn;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 4, 5}));
  // A turn inside the round's span never comes: the round took it.
  std::function<absl::Status()> body = [] { return absl::OkStatus(); };
  const absl::Status inside =
      order.Run(0, /*turn=*/2, absl::Now() + absl::Milliseconds(50), kNever, body);
  EXPECT_EQ(inside.code(), absl::StatusCode::kDeadlineExceeded) << inside;
}

TEST(ArenaOrderTest, ATurnWhoseTurnNeverComesEndsByItsDeadlineOrItsEpoch) {
  ArenaOrder order;
  bool ran = false;
  std::function<absl::Status()> body = [&] {
    ran = true;
    return absl::OkStatus();
  };
  const absl::Time start = absl::Now();
  absl::Status late = order.Run(1, /*turn=*/1, absl::Now() + absl::Milliseconds(100), kNever, body);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_NE(late.message().find("turn 0 has not run here"), absl::string_view::npos) << late;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  auto always = [] { return true; };
  absl::Status gone = order.Run(1, 1, absl::Now() + absl::Seconds(30), always, body);
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable) << gone;
  EXPECT_FALSE(ran);
  // A later epoch starts at turn 0; the earlier one is over for good.
  EXPECT_TRUE(order.Run(2, 0, absl::Now() + absl::Seconds(5), kNever, body).ok());
  EXPECT_TRUE(ran);
  absl::Status over = order.Run(1, 0, absl::Now() + absl::Seconds(5), kNever, body);
  EXPECT_EQ(over.code(), absl::StatusCode::kUnavailable) << over;
}

// A restarted master numbers its epochs from the start again: after Reset (a new connection),
// turn 0 of an epoch the old master had already used runs at once, and a turn still waiting from
// the old connection ends. (Without Reset the new turn 0 waited behind the old count until its
// deadline: tests/elastic:lifecycle_test's restarted master, once in four CI runs.)
// A restarted master numbers its epochs from the start again. After Reset (a new connection) an
// epoch number seen before starts at turn 0, and a turn left waiting from the old connection
// ends. Without it, tests/elastic:lifecycle_test's restarted master once left a peer's turn 0
// waiting behind the old count until its deadline.
TEST(ArenaOrderTest, AfterResetAnEpochNumberSeenBeforeStartsAgainAtTurnZero) {
  ArenaOrder order;
  int runs = 0;
  std::function<absl::Status()> body = [&] {
    ++runs;
    return absl::OkStatus();
  };
  for (int turn = 0; turn < 3; ++turn) {
    ASSERT_TRUE(order.Run(2, turn, absl::Now() + absl::Seconds(5), kNever, body).ok());
  }
  // Turn 5 of the old epoch 2 never comes; `abandoned` is first asked once it waits.
  std::atomic<bool> waiting{false};
  const std::function<bool()> note_waiting = [&] {
    waiting = true;
    return false;
  };
  absl::Status stale;
  std::thread old_turn(
      [&] { stale = order.Run(2, 5, absl::Now() + absl::Seconds(30), note_waiting, body); });
  while (!waiting) std::this_thread::yield();
  order.Reset();
  old_turn.join();
  EXPECT_EQ(stale.code(), absl::StatusCode::kUnavailable) << stale;
  const absl::Time start = absl::Now();
  absl::Status fresh = order.Run(2, 0, absl::Now() + absl::Seconds(5), kNever, body);
  EXPECT_TRUE(fresh.ok()) << fresh;
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(runs, 4);
}

}  // namespace
}  // namespace plexus::elastic
