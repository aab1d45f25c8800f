// EpochMesh without sockets: a transport registered here records every setup it is built from,
// and the owner's view of which epoch stands is a variable the tests move.
#include "frontend/elastic/epoch_mesh.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/core/mutex.h"
#include "base/store/hash_store.h"
#include "frontend/elastic/elastic_types.h"
#include "gtest/gtest.h"

namespace plexus::elastic {
namespace {

// Records its setup and whether it was aborted (in a flag that outlives it: the mesh destroys
// the transports it aborts); moves nothing.
class RecordingTransport : public Transport {
 public:
  RecordingTransport(TransportSetup setup, std::shared_ptr<std::atomic<bool>> aborted)
      : setup_(std::move(setup)), aborted_(std::move(aborted)) {}
  int rank() const override { return setup_.rank; }
  int size() const override { return setup_.size; }
  WorkPtr Send(int, MessageTag, absl::Span<const uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no sends here"), "send", setup_.rank);
  }
  WorkPtr Recv(int, MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no receives here"), "recv", setup_.rank);
  }
  WorkPtr RecvFromAny(MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("no receives here"), "recv", setup_.rank);
  }
  void AbortOperation(uint64_t, absl::Status) override {}
  void Abort(absl::Status) override { *aborted_ = true; }
  const TransportSetup& setup() const { return setup_; }

 private:
  TransportSetup setup_;
  std::shared_ptr<std::atomic<bool>> aborted_;
};

// What the registered factory does next, and what it built.
struct Factory {
  std::mutex mu;
  // Per transport built, whether it was aborted (kept after the mesh destroyed it).
  std::vector<std::shared_ptr<std::atomic<bool>>> aborted;
  absl::Status fail_with;                  // Returned instead of a transport when not OK.
  std::function<void()> while_connecting;  // Runs inside the build (the epoch may end there).
};

Factory& TheFactory() {
  static Factory* factory = [] {
    auto* made = new Factory;
    (void)RegisterTransport(
        "epoch_mesh_test",
        [made](const TransportSetup& setup) -> absl::StatusOr<std::unique_ptr<Transport>> {
          if (made->while_connecting) made->while_connecting();
          if (!made->fail_with.ok()) return made->fail_with;
          auto aborted = std::make_shared<std::atomic<bool>>(false);
          auto transport = std::make_unique<RecordingTransport>(setup, aborted);
          std::lock_guard<std::mutex> lock(made->mu);
          made->aborted.push_back(std::move(aborted));
          return transport;
        });
    return made;
  }();
  return *factory;
}

// An owner: the group's current epoch and ring, under its own mutex.
struct Owner {
  Mutex mu;
  int64_t epoch = 5;
  std::vector<int64_t> ring = {11, 12, 13};
  int64_t me = 12;
  std::shared_ptr<Store> store = std::make_shared<HashStore>();
  EpochMesh mesh{mu, "epoch_mesh_test", 3, TransportSetup{}, [this](int64_t asked) {
                   return asked == epoch ? absl::StatusOr<EpochMesh::Members>(
                                               EpochMesh::Members{ring, me, store, "10.0.0.2"})
                                         : absl::UnavailableError("epoch over");
                 }};
};

class EpochMeshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Factory& factory = TheFactory();
    std::lock_guard<std::mutex> lock(factory.mu);
    factory.aborted.clear();
    factory.fail_with = absl::OkStatus();
    factory.while_connecting = nullptr;
  }
  size_t Built() {
    std::lock_guard<std::mutex> lock(TheFactory().mu);
    return TheFactory().aborted.size();
  }
};

TEST_F(EpochMeshTest, BuildsOncePerEpochWithRankFromRingOrder) {
  Owner owner;
  auto first = owner.mesh.Get(5);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE(*first, nullptr);
  const auto& setup = static_cast<RecordingTransport&>(**first).setup();
  EXPECT_EQ(setup.rank, 1);  // Peer 12 is second in the ring, whatever its id.
  EXPECT_EQ(setup.size, 3);
  EXPECT_EQ(setup.group_name, "elastic/g3/e5");
  EXPECT_EQ(setup.address, "10.0.0.2");
  auto again = owner.mesh.Get(5);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(Built(), 1u);
  MutexLock lock(owner.mu);
  EXPECT_EQ(owner.mesh.StaleAt(5), nullptr);
  EXPECT_EQ(owner.mesh.StaleAt(6), *first);  // The group moved on: this one is to abort.
}

TEST_F(EpochMeshTest, ALaterEpochReplacesTheHeldConnections) {
  Owner owner;
  auto first = owner.mesh.Get(5);
  ASSERT_TRUE(first.ok());
  {
    MutexLock lock(owner.mu);
    owner.epoch = 6;
    owner.ring = {12, 11};
  }
  auto second = owner.mesh.Get(6);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*second, *first);
  EXPECT_EQ(static_cast<RecordingTransport&>(**second).setup().rank, 0);
  EXPECT_EQ(static_cast<RecordingTransport&>(**second).setup().group_name, "elastic/g3/e6");
  MutexLock lock(owner.mu);
  EXPECT_EQ(owner.mesh.current(), *second);
}

TEST_F(EpochMeshTest, AGroupOfOneNeedsNoConnections) {
  Owner owner;
  owner.ring = {12};
  auto mesh = owner.mesh.Get(5);
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(*mesh, nullptr);
  EXPECT_EQ(Built(), 0u);
  EXPECT_EQ(owner.mesh.SharedMemoryPeers(), 0);
}

TEST_F(EpochMeshTest, AnEpochThatIsOverOrLacksThisPeerBuildsNothing) {
  Owner owner;
  EXPECT_EQ(owner.mesh.Get(4).status().code(), absl::StatusCode::kUnavailable);
  owner.ring = {11, 13};
  auto absent = owner.mesh.Get(5);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(absent.status().message(), "not in the group's ring"));
  EXPECT_EQ(Built(), 0u);
}

TEST_F(EpochMeshTest, ConnectionsFinishedAfterTheirEpochEndedAreAbortedNotKept) {
  Owner owner;
  TheFactory().while_connecting = [&owner] {
    MutexLock lock(owner.mu);
    owner.epoch = 6;
  };
  auto mesh = owner.mesh.Get(5);
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(mesh.status().message(), "ended while connecting"));
  ASSERT_EQ(Built(), 1u);
  EXPECT_TRUE(*TheFactory().aborted[0]);
  MutexLock lock(owner.mu);
  EXPECT_EQ(owner.mesh.current(), nullptr);
}

TEST_F(EpochMeshTest, FailedConnectionsSayWhy) {
  Owner owner;
  TheFactory().fail_with = absl::AbortedError("cancelled");
  auto changed = owner.mesh.Get(5);
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(changed.status().message(), "peers changed while connecting"));
  TheFactory().fail_with = absl::DeadlineExceededError("rank 2 never connected");
  auto refused = owner.mesh.Get(5);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ResultOf(refused.status()), Result::kRankConnectionFailed);
  // A later call builds again: a failure is not kept.
  TheFactory().fail_with = absl::OkStatus();
  EXPECT_TRUE(owner.mesh.Get(5).ok());
}

}  // namespace
}  // namespace plexus::elastic
