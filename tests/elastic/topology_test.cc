// optimize_topology: the ring-order search on synthetic bandwidths, and forked peers measuring
// their loopback links and agreeing on the ring the master picks (asymmetric links are tested
// across network namespaces in bindings/python/tests/test_elastic_topology.py).
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/elastic/ring_order.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_peers.h"
#include "tests/testing/subprocess.h"

namespace plexus::elastic {
namespace {

BandwidthMatrix Uniform(int n, double value) {
  BandwidthMatrix m(n, std::vector<double>(n, value));
  for (int i = 0; i < n; ++i) m[i][i] = 0;
  return m;
}

TEST(RingOrderTest, AvoidsASlowDirectedLink) {
  BandwidthMatrix bw = Uniform(3, 100);
  bw[0][1] = 5;  // 0 -> 1 slow; 1 -> 0 fast.
  EXPECT_EQ(BestRing(bw), (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(Bottleneck({0, 1, 2}, bw), 5);
  EXPECT_EQ(Bottleneck({0, 2, 1}, bw), 100);
}

TEST(RingOrderTest, FindsTheOnlyFastRingAmongMany) {
  // Fast links only along 0 -> 3 -> 1 -> 4 -> 2 -> 5 -> 0; everything else slow.
  BandwidthMatrix bw = Uniform(6, 1);
  const std::vector<int> fast = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) bw[fast[i]][fast[(i + 1) % 6]] = 50;
  EXPECT_EQ(BestRing(bw), fast);
}

TEST(RingOrderTest, LargeGroupsUseTheGreedySearchAndStillAvoidSlowLinks) {
  const int n = 12;
  BandwidthMatrix bw = Uniform(n, 100);
  for (int i = 0; i < n; ++i) bw[i][(i + 1) % n] = 1;  // The identity ring is the worst one.
  const std::vector<int> ring = BestRing(bw);
  ASSERT_EQ(ring.size(), static_cast<size_t>(n));
  EXPECT_EQ(ring[0], 0);
  EXPECT_GT(Bottleneck(ring, bw), 1);
}

TEST(OptimizeTopologyTest, PeersMeasureAgreeOnTheRingAndKeepReducing) {
  constexpr int kWorld = 4;
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  const std::string dir = testing::TempPath("rings");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  absl::Status status = RunJoinedPeers(
      port, kWorld,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        std::string rings;
        for (int i = 0; i < 2; ++i) {
          auto changed = comm->OptimizeTopology();
          if (!changed.ok()) return Fail(peer, "optimize_topology", changed.status());
          // Read before the all-reduce: once a peer finishes, it leaves and the ring shrinks.
          absl::StrAppend(&rings, absl::StrJoin(comm->Ring(), ","), ";");
          double x = 1;
          ReduceDescriptor d;
          d.count = 1;
          d.dtype = DType::kFloat64;
          auto reduced = comm->AllReduce(&x, &x, d);
          if (!reduced.ok() || x != kWorld) return Fail(peer, "all_reduce after", reduced.status());
        }
        std::ofstream(absl::StrCat(dir, "/", peer)) << rings;
        return 0;
      },
      absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameOnEveryPeer(dir, kWorld);
}

}  // namespace
}  // namespace plexus::elastic
