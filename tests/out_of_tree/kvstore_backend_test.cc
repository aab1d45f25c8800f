// An out-of-tree backend, registered at run time, reached through "cpu:kvstore" with no change
// to frontend code: each collective family against a locally computed reference.
#include "tests/out_of_tree/kvstore_backend.h"

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/interface/backend_registry.h"
#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace kvstore_example {
namespace {

using plexus::DType;
using plexus::Tensor;

// Returns the number of failed checks in this rank.
int RunRank(const std::string& url, int rank, int world) {
  plexus::InitOptions options;
  options.backend = "cpu:kvstore";
  options.init_method = url;
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Seconds(60);
  auto group = plexus::InitProcessGroup(options);
  if (!group.ok()) {
    fprintf(stderr, "rank %d: init: %s\n", rank, group.status().ToString().c_str());
    return 1;
  }
  plexus::ProcessGroup& pg = **group;
  int failures = 0;
  auto ran = [&](const char* what, absl::StatusOr<plexus::WorkPtr> work) {
    absl::Status status = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
    if (!status.ok()) {
      fprintf(stderr, "rank %d: %s: %s\n", rank, what, status.ToString().c_str());
      ++failures;
    }
    return status.ok();
  };
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      fprintf(stderr, "rank %d: wrong result: %s\n", rank, what.c_str());
      ++failures;
    }
  };
  // all_reduce, float32 sum over 1001 elements: sum over ranks of (r + i).
  std::vector<float> values(1001);
  std::iota(values.begin(), values.end(), static_cast<float>(rank));
  if (ran("all_reduce", pg.AllReduce(Tensor::Flat(values.data(), DType::kFloat32, 1001)))) {
    for (int i = 0; i < 1001; ++i) {
      const float want = static_cast<float>(world * i + world * (world - 1) / 2);
      if (values[i] != want) {
        expect(false, absl::StrCat("all_reduce[", i, "] = ", values[i], ", want ", want));
        break;
      }
    }
  }
  // all_reduce, int64 max.
  int64_t top = rank * 7;
  plexus::AllReduceOptions max;
  max.op = plexus::ReduceOpKind::kMax;
  if (ran("all_reduce max", pg.AllReduce(Tensor::Flat(&top, DType::kInt64, 1), max))) {
    expect(top == (world - 1) * 7, absl::StrCat("max = ", top));
  }
  // broadcast from the last rank.
  int32_t word = rank == world - 1 ? 12345 : -1;
  plexus::BroadcastOptions from_last;
  from_last.root_rank = world - 1;
  if (ran("broadcast", pg.Broadcast(Tensor::Flat(&word, DType::kInt32, 1), from_last))) {
    expect(word == 12345, absl::StrCat("broadcast gave ", word));
  }
  // all_gather_into_tensor: block r holds r, r + 1, r + 2.
  std::vector<int32_t> mine = {rank, rank + 1, rank + 2};
  std::vector<int32_t> gathered(3 * world, -1);
  if (ran("all_gather",
          pg.AllGatherIntoTensor(Tensor::Flat(gathered.data(), DType::kInt32, 3 * world),
                                 Tensor::Flat(mine.data(), DType::kInt32, 3)))) {
    for (int r = 0; r < world; ++r) {
      for (int j = 0; j < 3; ++j) {
        expect(gathered[3 * r + j] == r + j, absl::StrCat("all_gather[", 3 * r + j, "]"));
      }
    }
  }
  // reduce_scatter_tensor: everyone contributes 1..world*2; block r of the sum is world * x.
  std::vector<double> input(2 * world);
  std::iota(input.begin(), input.end(), 1.0);
  std::vector<double> block(2, 0);
  if (ran("reduce_scatter",
          pg.ReduceScatterTensor(Tensor::Flat(block.data(), DType::kFloat64, 2),
                                 Tensor::Flat(input.data(), DType::kFloat64, 2 * world)))) {
    expect(block[0] == world * (2.0 * rank + 1) && block[1] == world * (2.0 * rank + 2),
           absl::StrCat("reduce_scatter gave ", block[0], ", ", block[1]));
  }
  // send/recv around a ring.
  if (world > 1) {
    int32_t out = rank * 100;
    int32_t in = -1;
    auto send = pg.Send(Tensor::Flat(&out, DType::kInt32, 1), (rank + 1) % world);
    if (ran("recv", pg.Recv(Tensor::Flat(&in, DType::kInt32, 1), (rank + world - 1) % world)) &&
        ran("send", send)) {
      expect(in == ((rank + world - 1) % world) * 100, absl::StrCat("recv gave ", in));
    }
  }
  ran("barrier", pg.Barrier());
  if (absl::Status shutdown = pg.Shutdown(absl::Seconds(60)); !shutdown.ok()) ++failures;
  return failures;
}

TEST(OutOfTreeBackendTest, UnknownUntilRegisteredThenServesEveryCollective) {
  // Not linked into any plexus target: the name resolves only after the run-time call.
  auto before = plexus::BackendRegistry::Global().Find(kBackendName);
  EXPECT_EQ(before.status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(RegisterKvStoreBackend().ok());
  EXPECT_EQ(RegisterKvStoreBackend().code(), absl::StatusCode::kAlreadyExists);
  for (int world : {1, 2, 3, 4}) {
    const std::string url = "file://" + plexus::testing::TempPath(absl::StrCat("kv", world));
    absl::Status status = plexus::testing::RunInChildren(
        world, [&](int rank) { return RunRank(url, rank, world); }, absl::Seconds(120));
    EXPECT_TRUE(status.ok()) << "world " << world << ": " << status;
  }
}

}  // namespace
}  // namespace kvstore_example
