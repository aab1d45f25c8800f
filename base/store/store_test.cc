// One suite run against every Store implementation.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/store/file_store.h"
#include "base/store/hash_store.h"
#include "base/store/prefix_store.h"
#include "base/store/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct StoreFactory {
  std::string name;
  // Creates a store; `peer` is a second handle onto the same data (another client).
  std::function<std::pair<std::shared_ptr<Store>, std::shared_ptr<Store>>()> make;
};

std::vector<StoreFactory> Factories() {
  return {
      {"hash",
       [] {
         auto store = std::make_shared<HashStore>(absl::Seconds(10));
         return std::make_pair<std::shared_ptr<Store>, std::shared_ptr<Store>>(store, store);
       }},
      {"file",
       [] {
         std::string path = testing::TempPath("file_store");
         std::shared_ptr<Store> a = *FileStore::Open(path, absl::Seconds(10));
         std::shared_ptr<Store> b = *FileStore::Open(path, absl::Seconds(10));
         return std::make_pair(a, b);
       }},
      {"tcp",
       [] {
         TCPStoreOptions options;
         options.is_server = true;
         options.timeout = absl::Seconds(10);
         std::shared_ptr<TCPStore> server = *TCPStore::Create(options);
         options.is_server = false;
         options.port = server->port();
         std::shared_ptr<Store> client = *TCPStore::Create(options);
         return std::make_pair<std::shared_ptr<Store>, std::shared_ptr<Store>>(server,
                                                                               std::move(client));
       }},
      {"prefix",
       [] {
         auto base = std::make_shared<HashStore>(absl::Seconds(10));
         return std::make_pair<std::shared_ptr<Store>, std::shared_ptr<Store>>(
             std::make_shared<PrefixStore>("group0", base),
             std::make_shared<PrefixStore>("group0", base));
       }},
  };
}

class StoreTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override { std::tie(store_, peer_) = GetParam().make(); }
  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> peer_;
};

TEST_P(StoreTest, SetGetAcrossHandles) {
  ASSERT_TRUE(store_->Set("key", std::string("v\0alue", 6)).ok());
  auto value = peer_->Get("key");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("v\0alue", 6));
  ASSERT_TRUE(peer_->Set("key", "overwritten").ok());
  EXPECT_EQ(*store_->Get("key"), "overwritten");
}

TEST_P(StoreTest, AddCountsAndRejectsNonIntegers) {
  EXPECT_EQ(*store_->Add("counter", 5), 5);
  EXPECT_EQ(*peer_->Add("counter", -2), 3);
  EXPECT_EQ(*store_->Get("counter"), "3");
  ASSERT_TRUE(store_->Set("text", "abc").ok());
  auto bad = peer_->Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("text"));
  EXPECT_EQ(*store_->Get("text"), "abc");  // Nothing lost.
  // Found by fuzzing the TCPStore server: a delta that overflows is refused, not wrapped.
  auto overflow = peer_->Add("counter", INT64_MAX);
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overflow.status().message(), HasSubstr("overflows"));
  EXPECT_EQ(*store_->Get("counter"), "3");
}

TEST_P(StoreTest, CompareSetFollowsC10dSemantics) {
  EXPECT_EQ(*store_->CompareSet("k", "", "first"), "first");        // Absent, empty expected.
  EXPECT_EQ(*store_->CompareSet("k", "wrong", "second"), "first");  // Mismatch keeps value.
  EXPECT_EQ(*peer_->CompareSet("k", "first", "third"), "third");    // Match swaps.
  EXPECT_EQ(*store_->CompareSet("absent", "x", "y"), "x");          // Absent, non-empty.
  EXPECT_FALSE(*store_->Check({"absent"}));
}

TEST_P(StoreTest, WaitForMissingKeyTimesOutPromptly) {
  const absl::Time start = absl::Now();
  absl::Status status = store_->Wait({"never", "set"}, absl::Milliseconds(200));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("waiting for keys [never, set]"));
  EXPECT_GE(took, absl::Milliseconds(190));
  EXPECT_LT(took, absl::Seconds(1));
}

TEST_P(StoreTest, GetTimesOutAtStoreTimeout) {
  store_->SetTimeout(absl::Milliseconds(100));
  auto value = store_->Get("missing");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded) << value.status();
  EXPECT_THAT(value.status().message(), HasSubstr("missing"));
}

TEST_P(StoreTest, WaitWakesWhenAnotherClientSets) {
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(30));
    ASSERT_TRUE(peer_->Set("late", "1").ok());
    ASSERT_TRUE(peer_->Set("later", "2").ok());
  });
  EXPECT_TRUE(store_->Wait({"late", "later"}, absl::Seconds(10)).ok());
  setter.join();
  EXPECT_THAT(*store_->MultiGet({"late", "later"}), ElementsAre("1", "2"));
}

TEST_P(StoreTest, CheckDeleteNumKeys) {
  const int64_t before = *store_->NumKeys();
  ASSERT_TRUE(store_->Set("a", "1").ok());
  ASSERT_TRUE(store_->Set("b", "2").ok());
  EXPECT_TRUE(*peer_->Check({"a", "b"}));
  EXPECT_FALSE(*peer_->Check({"a", "c"}));
  EXPECT_EQ(*store_->NumKeys(), before + 2);
  EXPECT_TRUE(*peer_->DeleteKey("a"));
  EXPECT_FALSE(*peer_->DeleteKey("a"));
  EXPECT_FALSE(*store_->Check({"a"}));
  EXPECT_EQ(*store_->NumKeys(), before + 1);
}

TEST_P(StoreTest, MultiSetMultiGetAppend) {
  ASSERT_TRUE(store_->MultiSet({"x", "y", "z"}, {"1", "22", ""}).ok());
  EXPECT_THAT(*peer_->MultiGet({"z", "x", "y"}), ElementsAre("", "1", "22"));
  EXPECT_EQ(store_->MultiSet({"x"}, {"1", "2"}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->Append("log", "ab").ok());
  ASSERT_TRUE(peer_->Append("log", "cd").ok());
  EXPECT_EQ(*store_->Get("log"), "abcd");
}

TEST_P(StoreTest, ConcurrentAddsFromThreads) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store& target = t % 2 == 0 ? *store_ : *peer_;
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(target.Add("n", 1).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(*store_->Get("n"), std::to_string(kThreads * kAdds));
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest, ::testing::ValuesIn(Factories()),
                         [](const auto& info) { return info.param.name; });

TEST(PrefixStoreTest, NamespacesDoNotCollide) {
  auto base = std::make_shared<HashStore>(absl::Seconds(1));
  PrefixStore a("a", base);
  PrefixStore b("b", base);
  ASSERT_TRUE(a.Set("k", "from a").ok());
  ASSERT_TRUE(b.Set("k", "from b").ok());
  EXPECT_EQ(*a.Get("k"), "from a");
  EXPECT_EQ(*base->Get("b/k"), "from b");
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  ASSERT_TRUE(nested.Set("k", "deep").ok());
  EXPECT_EQ(*base->Get("outer/inner/k"), "deep");
}

TEST(FileStoreTest, AddsFromManyProcessesAreAtomic) {
  const std::string path = testing::TempPath("file_store_procs");
  constexpr int kProcesses = 8;
  constexpr int kAdds = 100;
  absl::Status status = testing::RunInChildren(
      kProcesses,
      [&](int) {
        auto store = FileStore::Open(path, absl::Seconds(30));
        if (!store.ok()) return 1;
        for (int i = 0; i < kAdds; ++i) {
          if (!(*store)->Add("n", 1).ok()) return 2;
        }
        return (*store)->Wait({"never"}, absl::Milliseconds(1)).ok() ? 3 : 0;
      },
      absl::Seconds(60));
  ASSERT_TRUE(status.ok()) << status;
  auto store = FileStore::Open(path, absl::Seconds(1));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(*(*store)->Get("n"), std::to_string(kProcesses * kAdds));
}

TEST(FileStoreTest, UnopenablePathIsAClearError) {
  auto store = FileStore::Open("/nonexistent-dir/plexus/store");
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("/nonexistent-dir/plexus/store"));
}

}  // namespace
}  // namespace plexus
