// The shared-memory all-reduce over an in-process arena, driven step by step so the orders
// that a loaded machine produces only sometimes happen here every time.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/crowded_cores.h"
#include "algorithms/keep_originals.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
namespace {

constexpr size_t kRegionBytes = 4096;

// What every rank maps: regions and the published/announced words.
struct SharedState {
  explicit SharedState(int size, size_t region_bytes = kRegionBytes)
      : regions(size, std::vector<uint8_t>(region_bytes)),
        published(size),
        announced(size),
        failed_sequence(size) {}
  std::vector<std::vector<uint8_t>> regions;
  std::vector<std::atomic<uint64_t>> published;
  std::vector<std::atomic<uint64_t>> announced;
  std::vector<std::atomic<uint64_t>> failed_sequence;
};

// One rank's view. `before_wait` runs once, the first time this rank would wait for a peer:
// it stands for everything the other ranks do while this one is descheduled.
class FakeArena : public SharedArena {
 public:
  FakeArena(std::shared_ptr<SharedState> state, int rank) : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(state_->regions.size()); }
  size_t region_bytes() const override { return state_->regions[0].size(); }
  uint8_t* region(int rank) const override { return state_->regions[rank].data(); }
  uint64_t Published(int rank) const override { return state_->published[rank].load(); }
  void Publish(uint64_t value) override { state_->published[rank_].store(value); }
  void PublishFailure(absl::StatusCode code, uint64_t sequence) override {
    state_->failed_sequence[rank_].store(sequence);
    Publish(ArenaFailure(Published(rank_), code));
  }
  uint64_t FailedSequence(int rank) const override { return state_->failed_sequence[rank].load(); }
  uint64_t Announced(int rank) const override { return state_->announced[rank].load(); }
  void Announce(uint64_t word) override { state_->announced[rank_].store(word); }

  absl::StatusOr<uint64_t> WaitFor(int peer, uint64_t value, absl::Time deadline,
                                   absl::FunctionRef<bool(uint64_t)> stop) override {
    if (before_wait) std::exchange(before_wait, nullptr)();
    if (waits_before_leaving >= 0 && waits_before_leaving-- == 0) {
      Leave();
      return absl::UnavailableError(absl::StrCat("rank ", rank_, " left"));
    }
    while (true) {
      const uint64_t seen = state_->published[peer].load();
      if (seen >= value || (seen & kArenaFailed) != 0) return seen;
      if (stop(state_->announced[peer].load())) return seen;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, " waited for ", peer));
      }
      std::this_thread::yield();
    }
  }

  // What a rank shutting down cleanly publishes (as the TCP transport's arena does).
  void Leave() { PublishFailure(absl::StatusCode::kUnavailable, kArenaLeft); }

  std::function<void()> before_wait;
  int waits_before_leaving = -1;  // >= 0: that many waits, then the rank leaves (a crash).

 private:
  std::shared_ptr<SharedState> state_;
  int rank_;
};

// Only rank and size are used: the shared-memory algorithm sends nothing.
class SilentTransport : public Transport {
 public:
  SilentTransport(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  WorkPtr Send(int, MessageTag, absl::Span<const uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no sends here"), "send", rank_);
  }
  WorkPtr Recv(int, MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no receives here"), "recv", rank_);
  }
  WorkPtr RecvFromAny(MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no receives here"), "recv", rank_);
  }
  void AbortOperation(uint64_t, absl::Status) override {}
  void Abort(absl::Status) override {}

 private:
  int rank_;
  int size_;
};

struct Rank {
  Rank(std::shared_ptr<SharedState> state, int rank, int size, int64_t count)
      : transport(rank, size), arena(std::move(state), rank), data(count) {
    Fill(0);
  }
  // Inputs that differ from collective to collective (`round`), so a stale one shows.
  void Fill(int round) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = Input(transport.rank(), i, round);
  }
  static float Input(int rank, size_t i, int round) {
    return static_cast<float>((rank + 1) * 1000 + i % 4096 + 7 * round);
  }
  absl::Status Run(uint64_t sequence) {
    const uint64_t signature =
        MakeSignature(CollectiveKind::kAllReduce, DType::kFloat32, sequence, data.size());
    CollectiveContext ctx(transport, CollectiveKind::kAllReduce, sequence, signature,
                          absl::Seconds(20), nullptr);
    arena.Announce(signature);
    auto schedule = grouped ? SharedMemoryGroupedAllReduce : SharedMemoryAllReduce;
    return schedule(ctx, arena, data.data(), static_cast<int64_t>(data.size()), DType::kFloat32,
                    ReduceOpKind::kSum);
  }
  // The reduce-scatter schedule, keeping the input in `originals` (keep_originals.h); returns
  // how much of it was kept.
  absl::Status RunKeeping(uint64_t sequence, std::vector<float>& originals, size_t& kept) {
    const uint64_t signature =
        MakeSignature(CollectiveKind::kAllReduce, DType::kFloat32, sequence, data.size());
    CollectiveContext ctx(transport, CollectiveKind::kAllReduce, sequence, signature,
                          absl::Seconds(20), nullptr);
    ctx.KeepOriginals(reinterpret_cast<uint8_t*>(originals.data()), 0);
    arena.Announce(signature);
    absl::Status status = SharedMemoryReduceScatterAllReduce(ctx, arena, data.data(),
                                                             static_cast<int64_t>(data.size()),
                                                             DType::kFloat32, ReduceOpKind::kSum);
    kept = ctx.originals_kept();
    return status;
  }
  absl::Status RunBarrier(uint64_t sequence, absl::Duration timeout = absl::Seconds(20)) {
    const uint64_t signature = MakeSignature(CollectiveKind::kBarrier, DType::kUInt8, sequence, 0);
    CollectiveContext ctx(transport, CollectiveKind::kBarrier, sequence, signature, timeout,
                          nullptr);
    arena.Announce(signature);
    return SharedMemoryBarrier(ctx, arena);
  }
  SilentTransport transport;
  FakeArena arena;
  std::vector<float> data;
  bool grouped = false;  // Run: the grouped schedule whatever the size.
};

// The sums are of small whole numbers, exact in float32 in any order.
void ExpectSummed(const Rank& rank, int size, int round = 0) {
  for (size_t i = 0; i < rank.data.size(); ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += Rank::Input(r, i, round);
    ASSERT_EQ(rank.data[i], expected) << "rank " << rank.transport.rank() << " element " << i;
  }
}

// Runs collective `sequence` on every rank in its own thread, with inputs of `round`.
std::vector<absl::Status> RunTogether(std::vector<std::unique_ptr<Rank>>& ranks, uint64_t sequence,
                                      int round) {
  std::vector<absl::Status> statuses(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r]->Fill(round);
    threads.emplace_back([&, r] { statuses[r] = ranks[r]->Run(sequence); });
  }
  for (auto& thread : threads) thread.join();
  return statuses;
}

// The peer finished (it had this rank's input), returned to its caller and shut down before
// this rank, descheduled after publishing its input, looked at the peer's: the peer's data is
// there, so this rank completes.
TEST(SharedMemoryAllReduceTest, APeerThatFinishedAndLeftStillCompletesTheSlowRank) {
  auto state = std::make_shared<SharedState>(2);
  Rank slow(state, 0, 2, 64);
  Rank fast(state, 1, 2, 64);
  slow.arena.before_wait = [&] {
    ASSERT_TRUE(fast.Run(1).ok());
    fast.arena.Leave();
  };
  absl::Status status = slow.Run(1);
  ASSERT_TRUE(status.ok()) << status;
  ExpectSummed(slow, 2);
  ExpectSummed(fast, 2);
}

// A peer that left before publishing this collective's input fails it, naming the peer.
TEST(SharedMemoryAllReduceTest, APeerThatLeftBeforeItsInputFailsTheCollective) {
  auto state = std::make_shared<SharedState>(2);
  Rank waiting(state, 0, 2, 64);
  Rank gone(state, 1, 2, 64);
  waiting.arena.before_wait = [&] { gone.arena.Leave(); };
  absl::Status status = waiting.Run(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("rank 1 failed it"), absl::string_view::npos) << status;
  EXPECT_NE(waiting.arena.Published(0) & kArenaFailed, 0u);
}

// A peer that ran another collective under this sequence number and then left is reported as
// the disagreement it was, not as a lost peer.
TEST(SharedMemoryAllReduceTest, APeerThatRanAnotherCollectiveAndLeftIsAMismatch) {
  auto state = std::make_shared<SharedState>(2);
  Rank waiting(state, 0, 2, 64);
  Rank other(state, 1, 2, 64);
  waiting.arena.before_wait = [&] {
    other.arena.Announce(MakeSignature(CollectiveKind::kBarrier, DType::kUInt8, 1, 0));
    other.arena.Leave();
  };
  absl::Status status = waiting.Run(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("rank 1 is running barrier #1"), absl::string_view::npos)
      << status;
}

// A rank that failed collective 5 (it saw a mismatch before a slower peer began it) leaves the
// arena usable for collective 5, so the slower peer meets the failure there instead of taking
// another path; from collective 6 on, and after a rank left, every rank keeps off the arena.
TEST(SharedMemoryAllReduceTest, OnlyEarlierFailuresRetireTheArena) {
  auto state = std::make_shared<SharedState>(3);
  FakeArena zero(state, 0), one(state, 1), two(state, 2);
  EXPECT_TRUE(ArenaSlots::Usable(zero, 5));
  one.PublishFailure(absl::StatusCode::kFailedPrecondition, 5);
  EXPECT_TRUE(ArenaSlots::Usable(zero, 5));
  EXPECT_TRUE(ArenaSlots::Usable(one, 5));
  EXPECT_FALSE(ArenaSlots::Usable(zero, 6));
  EXPECT_FALSE(ArenaSlots::Usable(one, 6));
  auto fresh = std::make_shared<SharedState>(3);
  FakeArena fresh_zero(fresh, 0), fresh_two(fresh, 2);
  fresh_two.Leave();
  EXPECT_FALSE(ArenaSlots::Usable(fresh_zero, 1));
}

// A mismatch seen by the first rank to arrive reaches a rank that starts afterwards as the
// same FailedPrecondition, naming both collectives.
TEST(SharedMemoryAllReduceTest, ALateRankMeetsTheMismatchAnEarlyRankFailedOn) {
  auto state = std::make_shared<SharedState>(3);
  Rank early(state, 0, 3, 10);
  Rank middle(state, 1, 3, 12);
  Rank late(state, 2, 3, 12);
  middle.arena.Announce(MakeSignature(CollectiveKind::kAllReduce, DType::kFloat32, 1, 12));
  absl::Status first = early.Run(1);
  EXPECT_EQ(first.code(), absl::StatusCode::kFailedPrecondition) << first;
  ASSERT_TRUE(ArenaSlots::Usable(late.arena, 1));
  late.arena.before_wait = [&] { (void)middle.Run(1); };
  absl::Status last = late.Run(1);
  EXPECT_EQ(last.code(), absl::StatusCode::kFailedPrecondition) << last;
  EXPECT_NE(last.message().find("of 10 float32"), absl::string_view::npos) << last;
}

// Several pieces and three ranks in threads: the arena's two slots alternate correctly.
TEST(SharedMemoryAllReduceTest, ManyPiecesOnThreeRanks) {
  auto state = std::make_shared<SharedState>(3);
  const int64_t count = 5 * kRegionBytes / sizeof(float);  // Many pieces per collective.
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<Rank>(state, r, 3, count));
  for (uint64_t sequence = 1; sequence <= 20; ++sequence) {
    for (auto& rank : ranks) rank->Fill(0);
    std::vector<absl::Status> statuses(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] { statuses[r] = ranks[r]->Run(sequence); });
    }
    for (auto& thread : threads) thread.join();
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
      ExpectSummed(*ranks[r], 3);
    }
  }
}

// `size` ranks sharing `state`, each with `count` elements, running the grouped schedule if
// `grouped` (else "shm", which picks by itself).
std::vector<std::unique_ptr<Rank>> MakeRanks(const std::shared_ptr<SharedState>& state, int size,
                                             int64_t count, bool grouped) {
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::make_unique<Rank>(state, r, size, count));
    ranks.back()->grouped = grouped;
  }
  return ranks;
}

// Collectives 1 to `rounds`, each with inputs of its own round; every rank gets every sum.
void ExpectEveryRoundSummed(std::vector<std::unique_ptr<Rank>>& ranks, int rounds) {
  const int size = static_cast<int>(ranks.size());
  for (int round = 1; round <= rounds; ++round) {
    const std::vector<absl::Status> statuses = RunTogether(ranks, round, round);
    for (int r = 0; r < size; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
      ExpectSummed(*ranks[r], size, round);
    }
  }
}

TEST(SharedMemoryGroupedAllReduceTest, GroupsOfAboutTheSquareRoot) {
  EXPECT_EQ(GroupSizeForGroupedAllReduce(1), 1);
  EXPECT_EQ(GroupSizeForGroupedAllReduce(10), 3);
  EXPECT_EQ(GroupSizeForGroupedAllReduce(32), 6);
  EXPECT_EQ(GroupSizeForGroupedAllReduce(64), 8);
}

// Ten ranks make groups of 3, 3, 3 and 1; many pieces a collective, each collective's inputs
// different from the last, so a result read from a stale slot shows.
TEST(SharedMemoryGroupedAllReduceTest, ManyPiecesOnTenRanksInUnevenGroups) {
  constexpr int kRanks = 10;
  auto state = std::make_shared<SharedState>(kRanks);
  auto ranks = MakeRanks(state, kRanks, 3 * kRegionBytes / sizeof(float), /*grouped=*/true);
  ExpectEveryRoundSummed(ranks, 12);
}

// From kGroupedAllReduceFromRanks ranks, where each would read kGroupedAllReduceFromBytesRead
// or more, the "shm" schedule runs grouped: 33 ranks of 8 KiB each, groups of 6 and a last
// one of 3.
TEST(SharedMemoryGroupedAllReduceTest, TheShmScheduleRunsGroupedFromThirtyTwoRanks) {
  constexpr int kRanks = kGroupedAllReduceFromRanks + 1;
  static_assert(kRanks * 2048 * sizeof(float) >= kGroupedAllReduceFromBytesRead);
  auto state = std::make_shared<SharedState>(kRanks);
  auto ranks = MakeRanks(state, kRanks, 2048, /*grouped=*/false);
  ExpectEveryRoundSummed(ranks, 3);
}

// A member that left before publishing its input fails its leader, naming it, and through the
// leader every other rank: nobody waits for the result that cannot come.
TEST(SharedMemoryGroupedAllReduceTest, AMemberThatLeftFailsEveryRank) {
  auto state = std::make_shared<SharedState>(4);  // Groups {0, 1} and {2, 3}.
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 3; ++r) {  // Rank 3 never comes.
    ranks.push_back(std::make_unique<Rank>(state, r, 4, 64));
    ranks.back()->grouped = true;
  }
  FakeArena(state, 3).Leave();
  const std::vector<absl::Status> statuses = RunTogether(ranks, 1, 0);
  EXPECT_EQ(statuses[2].code(), absl::StatusCode::kUnavailable) << statuses[2];
  EXPECT_NE(statuses[2].message().find("rank 3 failed it"), absl::string_view::npos) << statuses[2];
  for (int r : {0, 1}) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << "rank " << r;
    EXPECT_NE(statuses[r].message().find("rank 2 failed it"), absl::string_view::npos)
        << statuses[r];
  }
}

// A member running another collective is named by its leader; every rank fails with the
// disagreement.
TEST(SharedMemoryGroupedAllReduceTest, AMemberRunningAnotherCollectiveFailsEveryRank) {
  auto state = std::make_shared<SharedState>(4);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Rank>(state, r, 4, r == 3 ? 10 : 12));
    ranks.back()->grouped = true;
  }
  const std::vector<absl::Status> statuses = RunTogether(ranks, 1, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kFailedPrecondition)
        << "rank " << r << ": " << statuses[r];
  }
  EXPECT_NE(statuses[2].message().find("rank 3 is running all_reduce #1 of 10 float32"),
            absl::string_view::npos)
      << statuses[2];
}

// Small all-reduces take turns among several places in a slot; mixed with ones of many pieces
// and barriers on three threads, every rank reads every input of the right collective.
TEST(SharedMemoryAllReduceTest, SmallCollectivesTakeTurnsAmongPlacesBesideLargeOnes) {
  constexpr size_t kLargeRegion = 64 << 10;
  auto state = std::make_shared<SharedState>(3, kLargeRegion);
  const std::vector<int64_t> counts = {256, 1, 1024, 5 * kLargeRegion / sizeof(float), 16, 700};
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 1; round <= 40; ++round) {
        Rank rank(state, r, 3, counts[round % counts.size()]);
        rank.Fill(round);
        const uint64_t sequence = static_cast<uint64_t>(round);
        absl::Status status = round % 7 == 0 ? rank.RunBarrier(sequence) : rank.Run(sequence);
        if (!status.ok()) {
          errors[r] = absl::StrCat("round ", round, ": ", status.ToString());
          return;
        }
        if (round % 7 == 0) continue;
        for (size_t i = 0; i < rank.data.size(); ++i) {
          float expected = 0;
          for (int peer = 0; peer < 3; ++peer) expected += Rank::Input(peer, i, round);
          if (rank.data[i] != expected) {
            errors[r] = absl::StrCat("round ", round, " element ", i, ": ", rank.data[i],
                                     " instead of ", expected);
            return;
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // The places do take turns: consecutive small collectives in a slot use different ones.
  SilentTransport transport(0, 3);
  FakeArena arena(state, 0);
  CollectiveContext ctx(transport, CollectiveKind::kAllReduce, 41, 1, absl::Seconds(1), nullptr);
  ArenaSlots small(ctx, arena, 1024);
  ArenaSlots large(ctx, arena);
  EXPECT_EQ(small.payload_bytes(), 4096u);
  EXPECT_NE(small.payload(0, 0), small.payload(0, 2));
  EXPECT_EQ(large.payload(0, 0), large.payload(0, 2));
}

// Barriers between all-reduces on three threads: nobody leaves a barrier before the last rank
// entered it, and the arena's slots stay in step across both kinds of collective.
TEST(SharedMemoryAllReduceTest, BarriersHoldEveryRankUntilTheLastArrives) {
  auto state = std::make_shared<SharedState>(3);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<Rank>(state, r, 3, 300));
  std::atomic<int> entered{0};
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (uint64_t sequence = 1; sequence <= 30; sequence += 2) {
        if (r == 2) absl::SleepFor(absl::Milliseconds(1));  // The last to arrive, each time.
        entered.fetch_add(1);
        absl::Status status = ranks[r]->RunBarrier(sequence);
        // Every rank has entered barrier k before anyone leaves it: 3 entries per barrier.
        const int seen = entered.load();
        if (status.ok() && seen < 3 * static_cast<int>(sequence / 2 + 1)) {
          status = absl::InternalError(
              absl::StrCat("left barrier ", sequence, " after ", seen, " entries"));
        }
        if (status.ok()) status = ranks[r]->Run(sequence + 1);
        if (!status.ok()) {
          errors[r] = status.ToString();
          return;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A rank in the barrier while its peer runs an all-reduce under the same sequence number
// fails naming both; with the peer absent it waits out its deadline.
TEST(SharedMemoryAllReduceTest, ABarrierMeetingAnotherCollectiveFailsNamingBoth) {
  auto state = std::make_shared<SharedState>(2);
  Rank barrier(state, 0, 2, 16);
  Rank other(state, 1, 2, 16);
  barrier.arena.before_wait = [&] {
    other.arena.Announce(MakeSignature(CollectiveKind::kAllReduce, DType::kFloat32, 1, 16));
  };
  absl::Status status = barrier.RunBarrier(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("all_reduce #1 of 16 float32"), absl::string_view::npos)
      << status;
  auto fresh = std::make_shared<SharedState>(2);
  Rank alone(fresh, 0, 2, 16);
  EXPECT_EQ(alone.RunBarrier(1, absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

// Kept originals: after a success they hold the whole input; after a peer crashed mid-way the
// kept prefix holds it and the buffer beyond it is untouched, so copying the prefix back undoes
// the all-reduce exactly.
TEST(SharedMemoryAllReduceTest, TheReduceScatterScheduleKeepsTheInputItOverwrites) {
  const int64_t count = 5 * kRegionBytes / sizeof(float) + 3;  // Many pieces, a ragged end.
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  auto state = std::make_shared<SharedState>(3);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<Rank>(state, r, 3, count));
  std::vector<std::vector<float>> originals(3, std::vector<float>(count, -1.0f));
  std::vector<size_t> kept(3);
  std::vector<absl::Status> statuses(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] { statuses[r] = ranks[r]->RunKeeping(1, originals[r], kept[r]); });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    ExpectSummed(*ranks[r], 3);
    EXPECT_EQ(kept[r], bytes) << "rank " << r;
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(originals[r][i], Rank::Input(r, static_cast<size_t>(i), 0)) << "element " << i;
    }
  }

  // Two ranks; the peer completes two pieces (two waits each) and crashes in the third.
  auto crash = std::make_shared<SharedState>(2);
  Rank survivor(crash, 0, 2, count);
  Rank crashing(crash, 1, 2, count);
  crashing.arena.waits_before_leaving = 5;
  std::vector<float> kept_input(count, -1.0f), unused(count);
  size_t survivor_kept = 0, crashing_kept = 0;
  absl::Status crashed;
  std::thread peer([&] { crashed = crashing.RunKeeping(1, unused, crashing_kept); });
  absl::Status failed = survivor.RunKeeping(1, kept_input, survivor_kept);
  peer.join();
  ASSERT_FALSE(failed.ok());
  ASSERT_FALSE(crashed.ok());
  ASSERT_GT(survivor_kept, 0u);
  ASSERT_LT(survivor_kept, bytes);
  ASSERT_EQ(survivor_kept % sizeof(float), 0u);
  const size_t prefix = survivor_kept / sizeof(float);
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    const float input = Rank::Input(0, i, 0);
    if (i < prefix) {
      ASSERT_EQ(kept_input[i], input) << "kept element " << i;
      ASSERT_NE(survivor.data[i], input) << "element " << i << " was summed";
    } else {
      ASSERT_EQ(survivor.data[i], input) << "element " << i << " beyond the kept prefix";
    }
  }
}

// With room for pieces larger than the quiet ones, the group grows them from the second piece
// on when its ranks report crowded cores, and keeps them small otherwise; the sums are right
// either way, through every mix of piece sizes in a slot.
TEST(SharedMemoryAllReduceTest, PiecesGrowWhenTheRanksReportCrowdedCores) {
  constexpr int kRanks = 3;
  auto state = std::make_shared<SharedState>(kRanks, size_t{12} << 20);
  const int64_t count = (int64_t{20} << 20) / static_cast<int64_t>(sizeof(float)) + 5;
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::make_unique<Rank>(state, r, kRanks, count));
  }
  auto run = [&](uint64_t sequence, double shortfall) -> uint64_t {
    for (int i = 0; i < 20; ++i) NoteRunShortfall(shortfall);
    const uint64_t before = ranks[0]->arena.Published(0);
    for (auto& rank : ranks) rank->Fill(0);
    std::vector<absl::Status> statuses(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        const uint64_t signature =
            MakeSignature(CollectiveKind::kAllReduce, DType::kFloat32, sequence, count);
        CollectiveContext ctx(ranks[r]->transport, CollectiveKind::kAllReduce, sequence, signature,
                              absl::Seconds(20), nullptr);
        ranks[r]->arena.Announce(signature);
        statuses[r] =
            SharedMemoryReduceScatterAllReduce(ctx, ranks[r]->arena, ranks[r]->data.data(), count,
                                               DType::kFloat32, ReduceOpKind::kSum);
      });
    }
    for (auto& thread : threads) thread.join();
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
      ExpectSummed(*ranks[r], kRanks);
    }
    return (ranks[0]->arena.Published(0) - before) / 2;  // Two steps a piece.
  };
  const uint64_t quiet = run(1, -1.0);
  const uint64_t crowded = run(2, 1.0);
  const uint64_t crowded_again = run(3, 1.0);  // The other slot first this time.
  const uint64_t quiet_again = run(4, -1.0);
  // 20 MiB: 2 MiB of slot holds 1.5 MiB of input (and its result) while quiet; crowded, one
  // such piece, then the 6 MiB slots' 4.5 MiB ones.
  EXPECT_EQ(quiet, 14u);
  EXPECT_EQ(crowded, 6u);
  EXPECT_EQ(crowded_again, crowded);
  EXPECT_EQ(quiet_again, quiet);
}

TEST(KeepOriginalsTest, CopiesAtAnyAlignmentAndLength) {
  std::vector<uint8_t> from(100000), to(100008), data(100000), save(100008);
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t offset : {0, 1, 3, 8}) {
    for (size_t length : {size_t{0}, size_t{5}, size_t{4095}, size_t{4096}, size_t{99991}}) {
      std::fill(to.begin(), to.end(), 0);
      CopyAside(to.data() + offset, from.data(), length);
      ASSERT_TRUE(std::equal(from.begin(), from.begin() + length, to.begin() + offset))
          << offset << " " << length;
      ASSERT_EQ(to[offset + length], 0) << "wrote past the end";
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 3);
      const std::vector<uint8_t> before = data;
      SaveThenOverwrite(data.data() + 1, from.data(), save.data() + offset, length);
      ASSERT_TRUE(
          std::equal(before.begin() + 1, before.begin() + 1 + length, save.begin() + offset));
      ASSERT_TRUE(std::equal(from.begin(), from.begin() + length, data.begin() + 1));
      ASSERT_EQ(data[1 + length], before[1 + length]);
    }
  }
}

}  // namespace
}  // namespace plexus::algorithms
