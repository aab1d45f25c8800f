// Conformance: all_reduce (every algorithm), all_reduce_coalesced, reduce, reduce_scatter and
// reduce_scatter_tensor over every dtype x valid op x count, at every world size.
#include <cstdlib>
#include <vector>

#include "base/core/reduce_op.h"
#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/reference.h"

namespace plexus::conformance {
namespace {

// Whether the backend serving the device under test declares it cannot do (op, dtype).
bool DeclaredUnsupported(const ProcessGroup& group, ReduceOpKind op, DType dtype) {
  auto backend = group.BackendFor(DeviceTypeUnderTest());
  if (!backend.ok()) return false;
  for (const auto& pair : (*backend)->capabilities().unsupported_reductions) {
    if (pair.op == op && pair.dtype == dtype) return true;
  }
  return false;
}

// The ops valid for `dtype` that the backend under test supports.
std::vector<ReduceOp> ValidOps(const ProcessGroup& group, DType dtype) {
  std::vector<ReduceOp> ops;
  for (ReduceOpKind kind : kAllReduceOpKinds) {
    ReduceOp op = kind == ReduceOpKind::kPremulSum ? ReduceOp::PremulSum(0.5) : ReduceOp(kind);
    if (ValidateReduceOp(op, dtype).ok() && !DeclaredUnsupported(group, kind, dtype)) {
      ops.push_back(op);
    }
  }
  return ops;
}

std::vector<double> Expected(DType dtype, const ReduceOp& op, int world, int64_t count,
                             int64_t first = 0) {
  std::vector<double> expected(count);
  for (int64_t i = 0; i < count; ++i) expected[i] = ReducedValue(dtype, op, world, first + i);
  return expected;
}

// The ops a forced schedule runs for `dtype`. A schedule moves elements by size and applies the
// shared kernel, so it runs each dtype with SUM (bool: its first op) and the ops that scale (AVG,
// PREMUL_SUM), and every op only on float32 and int64; the default pass runs the whole matrix.
std::vector<ReduceOp> ScheduleOps(const ProcessGroup& group, DType dtype) {
  std::vector<ReduceOp> ops = ValidOps(group, dtype);
  if (dtype == DType::kFloat32 || dtype == DType::kInt64) return ops;
  std::vector<ReduceOp> kept;
  for (const ReduceOp& op : ops) {
    if (op.kind == ReduceOpKind::kSum || op.kind == ReduceOpKind::kAvg ||
        op.kind == ReduceOpKind::kPremulSum) {
      kept.push_back(op);
    }
  }
  if (kept.empty() && !ops.empty()) kept.push_back(ops.front());  // bool has no SUM.
  return kept;
}

// Runs the all_reduce matrix on `group` (every valid op, or with `schedule_only` those of
// ScheduleOps), and checks results are bit-identical across ranks.
void AllReduceMatrix(ProcessGroup& group, Checker& check, const std::string& label,
                     bool schedule_only = false) {
  uint64_t fingerprint = 0;
  for (DType dtype : kAllDTypes) {
    for (const ReduceOp& op : schedule_only ? ScheduleOps(group, dtype) : ValidOps(group, dtype)) {
      for (int64_t count : Counts()) {
        Buffer data = MakeInput(dtype, op.kind, group.rank(), count);
        AllReduceOptions options;
        options.op = op;
        const std::string what = absl::StrCat(label, " all_reduce ", DTypeName(dtype), " ",
                                              ReduceOpName(op), " x", count);
        if (!check.Ran(what, group.AllReduce(DeviceTensor(data.data(), dtype, count), options))) {
          continue;
        }
        std::string diff = Compare(data, Expected(dtype, op, group.size(), count), op);
        if (!diff.empty()) check.Fail(what, ": ", diff);
        fingerprint = fingerprint * 31 + Fingerprint(data.bytes(), data.nbytes());
      }
    }
  }
  // Every rank must hold the same bits: compare fingerprints through the store.
  Store& store = *group.store();
  const std::string key = absl::StrCat("fingerprint/", label, "/");
  if (!store.Set(absl::StrCat(key, group.rank()), absl::StrCat(fingerprint)).ok()) return;
  for (int r = 0; r < group.size(); ++r) {
    auto theirs = store.Get(absl::StrCat(key, r));
    if (!theirs.ok() || *theirs != absl::StrCat(fingerprint)) {
      check.Fail(label, " all_reduce results differ in bits between rank ", group.rank(),
                 " and rank ", r);
    }
  }
}

class ReductionsTest : public ::testing::TestWithParam<int> {};

// What a backend declares it cannot reduce is refused by the call itself, before anything runs,
// and leaves the tensor as it was.
TEST_P(ReductionsTest, DeclaredUnsupportedReductionsAreRefusedUpFront) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    for (DType dtype : kAllDTypes) {
      for (ReduceOpKind kind : kAllReduceOpKinds) {
        if (!DeclaredUnsupported(group, kind, dtype)) continue;
        Buffer data = MakeInput(dtype, kind, group.rank(), 5);
        const Buffer original = data;
        AllReduceOptions options;
        options.op = kind;
        auto work = group.AllReduce(DeviceTensor(data.data(), dtype, 5), options);
        if (work.ok() || !absl::IsInvalidArgument(work.status())) {
          check.Fail("all_reduce ", DTypeName(dtype), " ", ReduceOpName(kind),
                     " is declared unsupported but was not refused: ",
                     work.ok() ? "accepted" : work.status().ToString());
        }
        if (Fingerprint(data.bytes(), data.nbytes()) !=
            Fingerprint(original.bytes(), original.nbytes())) {
          check.Fail("a refused all_reduce changed its tensor");
        }
      }
    }
  });
}

TEST_P(ReductionsTest, AllReduceWithEveryAlgorithm) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    AllReduceMatrix(group, check, "default");
    // Each flat schedule forced everywhere (also where the group's transport would pick from
    // the same-host or multi-host ranges), then each of those ranges' own algorithms (where
    // the transport cannot run one, the default flat schedule runs instead).
    for (const char* algorithm : {"ring", "rd", "hd", "shm", "shm_rs", "hier"}) {
      const std::string name = algorithm;
      const std::string spec =
          name == "shm" || name == "shm_rs" ? absl::StrCat("all_reduce_same_host:0-:", name)
          : name == "hier"                  ? absl::StrCat("all_reduce_multi_host:0-:", name)
                           : absl::StrCat("all_reduce:0-:", name, ";all_reduce_same_host:0-:", name,
                                          ";all_reduce_multi_host:0-:", name);
      setenv("PLEXUS_ALGO", spec.c_str(), 1);
      std::vector<int> everyone;
      for (int r = 0; r < group.size(); ++r) everyone.push_back(r);
      auto forced = group.NewGroup(everyone);
      unsetenv("PLEXUS_ALGO");
      if (!forced.ok()) {
        check.Fail("new_group: ", forced.status().ToString());
        return;
      }
      AllReduceMatrix(**forced, check, algorithm, /*schedule_only=*/true);
      (void)(*forced)->Shutdown(absl::Seconds(60));
    }
  });
}

TEST_P(ReductionsTest, AllReduceCoalesced) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kBFloat16}) {
      std::vector<Buffer> buffers;
      std::vector<Tensor> tensors;
      const std::vector<int64_t> counts = {3, 0, 1001, 1};
      for (size_t t = 0; t < counts.size(); ++t) {
        buffers.push_back(MakeInput(dtype, ReduceOpKind::kSum, group.rank(), counts[t], t));
      }
      for (Buffer& b : buffers) tensors.push_back(DeviceTensor(b.data(), dtype, b.count()));
      if (!check.Ran("all_reduce_coalesced", group.AllReduceCoalesced(tensors))) continue;
      for (size_t t = 0; t < counts.size(); ++t) {
        std::vector<double> expected(counts[t]);
        for (int64_t i = 0; i < counts[t]; ++i) {
          expected[i] = ReducedValue(dtype, ReduceOpKind::kSum, group.size(), i, t);
        }
        std::string diff = Compare(buffers[t], expected, ReduceOpKind::kSum);
        if (!diff.empty()) check.Fail("all_reduce_coalesced tensor ", t, ": ", diff);
      }
    }
  });
}

void CheckReduce(ProcessGroup& group, Checker& check) {
  for (int root : {0, group.size() - 1}) {
    for (DType dtype : kAllDTypes) {
      for (const ReduceOp& op : ValidOps(group, dtype)) {
        for (int64_t count : {int64_t{0}, int64_t{7}, int64_t{70001}}) {
          Buffer data = MakeInput(dtype, op.kind, group.rank(), count);
          const Buffer original = data;
          ReduceOptions options;
          options.op = op;
          options.root_rank = root;
          const std::string what = absl::StrCat("reduce root ", root, " ", DTypeName(dtype), " ",
                                                ReduceOpName(op), " x", count);
          if (!check.Ran(what, group.Reduce(DeviceTensor(data.data(), dtype, count), options))) {
            continue;
          }
          std::vector<double> expected;
          if (group.rank() == root) {
            expected = Expected(dtype, op, group.size(), count);
          } else {
            for (int64_t i = 0; i < count; ++i) expected.push_back(original.Get(i));
          }
          std::string diff = Compare(data, expected, group.rank() == root ? op : ReduceOp());
          if (!diff.empty()) check.Fail(what, ": ", diff);
        }
      }
    }
  }
}

TEST_P(ReductionsTest, ReduceToEveryRoot) { RunWorld(GetParam(), CheckReduce); }

void CheckReduceScatter(ProcessGroup& group, Checker& check) {
  const int n = group.size();
  for (DType dtype : kAllDTypes) {
    for (const ReduceOp& op : ValidOps(group, dtype)) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{20001}}) {
        // Element j of the flat input is InputValue(rank, j); rank r's block is [r*count, ...).
        Buffer input = MakeInput(dtype, op.kind, group.rank(), count * n);
        const std::vector<double> expected = Expected(dtype, op, n, count, group.rank() * count);
        const std::string what =
            absl::StrCat("reduce_scatter ", DTypeName(dtype), " ", ReduceOpName(op), " x", count);
        Buffer output(dtype, count);
        ReduceScatterOptions options;
        options.op = op;
        if (check.Ran(
                what + " (tensor)",
                group.ReduceScatterTensor(DeviceTensor(output.data(), dtype, count),
                                          DeviceTensor(input.data(), dtype, count * n), options))) {
          std::string diff = Compare(output, expected, op);
          if (!diff.empty()) check.Fail(what, " (tensor): ", diff);
        }
        const Buffer untouched = MakeInput(dtype, op.kind, group.rank(), count * n);
        if (Fingerprint(input.bytes(), input.nbytes()) !=
            Fingerprint(untouched.bytes(), untouched.nbytes())) {
          check.Fail(what, ": the input tensor was modified");
        }
        std::vector<Tensor> inputs;
        for (int r = 0; r < n; ++r) {
          inputs.push_back(DeviceTensor(
              static_cast<uint8_t*>(input.data()) + r * count * DTypeSize(dtype), dtype, count));
        }
        Buffer list_output(dtype, count);
        if (check.Ran(what + " (list)",
                      group.ReduceScatter(DeviceTensor(list_output.data(), dtype, count), inputs,
                                          options))) {
          std::string diff = Compare(list_output, expected, op);
          if (!diff.empty()) check.Fail(what, " (list): ", diff);
        }
      }
    }
  }
}

TEST_P(ReductionsTest, ReduceScatterListAndTensor) { RunWorld(GetParam(), CheckReduceScatter); }

// Each collective with more than one schedule, once per schedule (all_reduce's are above).
TEST_P(ReductionsTest, EveryAlgorithmOfEachCollective) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    WithEveryAlgorithm(group, check, "reduce", CheckReduce);
    WithEveryAlgorithm(group, check, "reduce_scatter", CheckReduceScatter);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ReductionsTest, ::testing::ValuesIn(WorldSizes()),
                         [](const auto& info) { return absl::StrCat("world", info.param); });

}  // namespace
}  // namespace plexus::conformance
