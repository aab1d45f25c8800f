// The address each rank advertises, resolved together over a shared store (threads stand in for
// ranks on one host; tests/multihost runs ranks in separate network namespaces).
#include "frontend/dispatch/advertise_address.h"

#include <sys/socket.h>

#include <map>
#include <thread>
#include <vector>

#include "base/net/interfaces.h"
#include "base/store/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_env.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

// Runs `size` ranks at once; returns each one's result.
std::vector<absl::StatusOr<std::string>> ResolveAll(int size, const std::string& store_host,
                                                    const EnvLookup& env) {
  auto store = std::make_shared<HashStore>();
  std::vector<absl::StatusOr<std::string>> results(size, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      AdvertiseAddressOptions options;
      options.rank = rank;
      options.size = size;
      options.store_host = store_host;
      options.timeout = absl::Seconds(20);
      results[rank] = ResolveAdvertiseAddress(*store, options, env);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(AdvertiseAddressTest, LoopbackStoreWithEveryRankLocalStaysOnLoopback) {
  for (const std::string& host : {std::string("127.0.0.1"), std::string("")}) {
    for (const auto& result : ResolveAll(3, host, testing::FakeEnv({}))) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(*result, "127.0.0.1") << "store host '" << host << "'";
    }
  }
}

TEST(AdvertiseAddressTest, IPv6LoopbackStoreGivesIPv6Loopback) {
  auto all = net::ListInterfaceAddresses();
  ASSERT_TRUE(all.ok());
  bool has_v6_loopback = false;
  for (const auto& a : *all) has_v6_loopback |= a.address == "::1";
  if (!has_v6_loopback) GTEST_SKIP() << "no ::1 here";
  for (const auto& result : ResolveAll(2, "::1", testing::FakeEnv({}))) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, "::1");
  }
}

TEST(AdvertiseAddressTest, StoreOnAnInterfaceAddressGivesThatAddress) {
  auto all = net::ListInterfaceAddresses();
  ASSERT_TRUE(all.ok());
  std::string real;
  for (const auto& a : *all) {
    if (!a.loopback && a.family == AF_INET) real = a.address;
  }
  if (real.empty()) GTEST_SKIP() << "no IPv4 interface besides loopback";
  for (const auto& result : ResolveAll(2, real, testing::FakeEnv({}))) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, real);
  }
}

TEST(AdvertiseAddressTest, PlexusTcpAddrIsTakenAsGiven) {
  for (const auto& result : ResolveAll(
           2, "127.0.0.1",
           testing::FakeEnv({{"PLEXUS_TCP_ADDR", "127.0.0.2"}, {"PLEXUS_SOCKET_IFNAME", "=lo"}}))) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, "127.0.0.2");
  }
}

TEST(AdvertiseAddressTest, InterfaceFiltersPickTheirInterface) {
  for (const auto& env :
       {testing::FakeEnv({{"PLEXUS_SOCKET_IFNAME", "=lo"}}),
        testing::FakeEnv({{"GLOO_SOCKET_IFNAME", "lo"}}),
        testing::FakeEnv({{"PLEXUS_SOCKET_IFNAME", "lo"}, {"GLOO_SOCKET_IFNAME", "eth0"}})}) {
    for (const auto& result : ResolveAll(2, "", env)) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(*result, "127.0.0.1");
    }
  }
}

TEST(AdvertiseAddressTest, FilterMatchingNothingNamesTheVariableAndInterfaces) {
  // Rank 0 fails before publishing; a single rank shows the error without waiting on others.
  auto results =
      ResolveAll(1, "127.0.0.1", testing::FakeEnv({{"PLEXUS_SOCKET_IFNAME", "=nosuch0"}}));
  ASSERT_FALSE(results[0].ok());
  EXPECT_TRUE(absl::IsInvalidArgument(results[0].status()));
  EXPECT_THAT(std::string(results[0].status().message()),
              HasSubstr("PLEXUS_SOCKET_IFNAME==nosuch0 matches no interface"));
  EXPECT_THAT(std::string(results[0].status().message()), HasSubstr("lo 127.0.0.1"));
}

TEST(AdvertiseAddressTest, UnreachableStoreHostSaysWhatToSet) {
  auto results = ResolveAll(1, "no-such-host.invalid", testing::FakeEnv({}));
  ASSERT_FALSE(results[0].ok());
  EXPECT_TRUE(absl::IsUnavailable(results[0].status())) << results[0].status();
  EXPECT_THAT(std::string(results[0].status().message()), HasSubstr("no-such-host.invalid"));
  EXPECT_THAT(std::string(results[0].status().message()), HasSubstr("PLEXUS_SOCKET_IFNAME"));
}

}  // namespace
}  // namespace plexus
