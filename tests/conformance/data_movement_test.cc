// Conformance: broadcast, all_gather (list and tensor), gather, scatter, all_to_all (list,
// single, uneven), barrier, and point-to-point, over every dtype and awkward counts.
#include <vector>

#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/conformance/reference.h"

namespace plexus::conformance {
namespace {

// Rank r's payload for data-movement tests; `salt` distinguishes pieces.
Buffer Payload(DType dtype, int rank, int64_t count, int salt = 0) {
  return MakeInput(dtype, ReduceOpKind::kSum, rank, count, salt);
}

std::vector<double> PayloadValues(DType dtype, int rank, int64_t count, int salt = 0) {
  std::vector<double> values;
  const Buffer b = Payload(dtype, rank, count, salt);
  for (int64_t i = 0; i < count; ++i) values.push_back(b.Get(i));
  return values;
}

void Expect(Checker& check, const std::string& what, const Buffer& got,
            const std::vector<double>& expected) {
  std::string diff = Compare(got, expected, ReduceOpKind::kSum);
  if (!diff.empty()) check.Fail(what, ": ", diff);
}

class DataMovementTest : public ::testing::TestWithParam<int> {};

void CheckBroadcast(ProcessGroup& group, Checker& check) {
  for (int root = 0; root < group.size(); ++root) {
    for (DType dtype : kAllDTypes) {
      for (int64_t count : Counts()) {
        Buffer data = group.rank() == root ? Payload(dtype, root, count) : Buffer(dtype, count);
        BroadcastOptions options;
        options.root_rank = root;
        const std::string what =
            absl::StrCat("broadcast root ", root, " ", DTypeName(dtype), " x", count);
        if (check.Ran(what, group.Broadcast(DeviceTensor(data.data(), dtype, count), options))) {
          Expect(check, what, data, PayloadValues(dtype, root, count));
        }
      }
    }
  }
}

TEST_P(DataMovementTest, BroadcastFromEveryRoot) { RunWorld(GetParam(), CheckBroadcast); }

void CheckAllGather(ProcessGroup& group, Checker& check) {
  const int n = group.size();
  for (DType dtype : kAllDTypes) {
    for (int64_t count : Counts()) {
      Buffer input = Payload(dtype, group.rank(), count);
      const std::string what = absl::StrCat("all_gather ", DTypeName(dtype), " x", count);
      Buffer flat(dtype, count * n);
      if (check.Ran(what + " (tensor)",
                    group.AllGatherIntoTensor(DeviceTensor(flat.data(), dtype, count * n),
                                              DeviceTensor(input.data(), dtype, count)))) {
        std::vector<double> expected;
        for (int r = 0; r < n; ++r) {
          for (double v : PayloadValues(dtype, r, count)) expected.push_back(v);
        }
        Expect(check, what + " (tensor)", flat, expected);
      }
      std::vector<Buffer> outputs(n, Buffer(dtype, count));
      std::vector<Tensor> tensors;
      for (Buffer& b : outputs) tensors.push_back(DeviceTensor(b.data(), dtype, count));
      if (check.Ran(what + " (list)",
                    group.AllGather(tensors, DeviceTensor(input.data(), dtype, count)))) {
        for (int r = 0; r < n; ++r) {
          Expect(check, absl::StrCat(what, " (list) from rank ", r), outputs[r],
                 PayloadValues(dtype, r, count));
        }
      }
    }
  }
}

TEST_P(DataMovementTest, AllGatherListAndTensor) { RunWorld(GetParam(), CheckAllGather); }

void CheckGatherAndScatter(ProcessGroup& group, Checker& check) {
  const int n = group.size();
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::kFloat32, DType::kInt8, DType::kFloat64, DType::kBFloat16}) {
      for (int64_t count : Counts()) {
        const std::string what = absl::StrCat("root ", root, " ", DTypeName(dtype), " x", count);
        Buffer input = Payload(dtype, group.rank(), count);
        std::vector<Buffer> outputs;
        std::vector<Tensor> tensors;
        if (group.rank() == root) {
          outputs.assign(n, Buffer(dtype, count));
          for (Buffer& b : outputs) tensors.push_back(DeviceTensor(b.data(), dtype, count));
        }
        GatherOptions gather;
        gather.root_rank = root;
        if (check.Ran("gather " + what,
                      group.Gather(tensors, DeviceTensor(input.data(), dtype, count), gather)) &&
            group.rank() == root) {
          for (int r = 0; r < n; ++r) {
            Expect(check, absl::StrCat("gather ", what, " from ", r), outputs[r],
                   PayloadValues(dtype, r, count));
          }
        }
        std::vector<Buffer> pieces;
        std::vector<Tensor> inputs;
        if (group.rank() == root) {
          for (int r = 0; r < n; ++r) pieces.push_back(Payload(dtype, r, count, 9));
          for (Buffer& b : pieces) inputs.push_back(DeviceTensor(b.data(), dtype, count));
        }
        Buffer output(dtype, count);
        ScatterOptions scatter;
        scatter.root_rank = root;
        if (check.Ran("scatter " + what,
                      group.Scatter(DeviceTensor(output.data(), dtype, count), inputs, scatter))) {
          Expect(check, "scatter " + what, output, PayloadValues(dtype, group.rank(), count, 9));
        }
      }
    }
  }
}

TEST_P(DataMovementTest, GatherAndScatterAtEveryRoot) {
  RunWorld(GetParam(), CheckGatherAndScatter);
}

void CheckAllToAll(ProcessGroup& group, Checker& check) {
  const int n = group.size();
  const int me = group.rank();
  // Rank s sends (s + d) % 3 + k elements to rank d, salted by the destination.
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3001}}) {
    auto size_of = [k](int source, int dest) { return (source + dest) % 3 + k; };
    std::vector<Buffer> in, out;
    std::vector<Tensor> in_tensors, out_tensors;
    for (int d = 0; d < n; ++d) in.push_back(Payload(DType::kInt32, me, size_of(me, d), d));
    for (int s = 0; s < n; ++s) out.push_back(Buffer(DType::kInt32, size_of(s, me)));
    for (Buffer& b : in) in_tensors.push_back(DeviceTensor(b.data(), DType::kInt32, b.count()));
    for (Buffer& b : out) out_tensors.push_back(DeviceTensor(b.data(), DType::kInt32, b.count()));
    if (check.Ran(absl::StrCat("all_to_all k=", k), group.AllToAll(out_tensors, in_tensors))) {
      for (int s = 0; s < n; ++s) {
        Expect(check, absl::StrCat("all_to_all k=", k, " from ", s), out[s],
               PayloadValues(DType::kInt32, s, size_of(s, me), me));
      }
    }
    // The same exchange as one flat tensor with split sizes (rows of 2 elements).
    std::vector<int64_t> in_splits, out_splits;
    std::vector<double> sent, expected;
    for (int d = 0; d < n; ++d) {
      in_splits.push_back(size_of(me, d));
      for (double v : PayloadValues(DType::kFloat64, me, 2 * size_of(me, d), d)) sent.push_back(v);
    }
    for (int s = 0; s < n; ++s) {
      out_splits.push_back(size_of(s, me));
      for (double v : PayloadValues(DType::kFloat64, s, 2 * size_of(s, me), me)) {
        expected.push_back(v);
      }
    }
    Buffer flat_in(DType::kFloat64, sent.size()), flat_out(DType::kFloat64, expected.size());
    for (size_t i = 0; i < sent.size(); ++i) flat_in.Set(i, sent[i]);
    Tensor in_tensor(flat_in.data(), DType::kFloat64,
                     Shape{static_cast<int64_t>(sent.size()) / 2, 2}, DeviceUnderTest());
    Tensor out_tensor(flat_out.data(), DType::kFloat64,
                      Shape{static_cast<int64_t>(expected.size()) / 2, 2}, DeviceUnderTest());
    if (check.Ran(absl::StrCat("all_to_all_single uneven k=", k),
                  group.AllToAllSingle(out_tensor, in_tensor, out_splits, in_splits))) {
      Expect(check, absl::StrCat("all_to_all_single uneven k=", k), flat_out, expected);
    }
  }
  // Equal splits, inferred.
  const int64_t per = 5;
  Buffer in(DType::kInt64, per * n), out(DType::kInt64, per * n);
  for (int d = 0; d < n; ++d) {
    for (int64_t i = 0; i < per; ++i) in.Set(d * per + i, me * 1000 + d * 10 + i);
  }
  if (check.Ran("all_to_all_single even",
                group.AllToAllSingle(DeviceTensor(out.data(), DType::kInt64, per * n),
                                     DeviceTensor(in.data(), DType::kInt64, per * n)))) {
    std::vector<double> expected;
    for (int s = 0; s < n; ++s) {
      for (int64_t i = 0; i < per; ++i) expected.push_back(s * 1000 + me * 10 + i);
    }
    Expect(check, "all_to_all_single even", out, expected);
  }
}

TEST_P(DataMovementTest, AllToAllEvenAndUneven) { RunWorld(GetParam(), CheckAllToAll); }

// Each collective with more than one schedule, once per schedule (the default run above covers
// the one of a collective that has only that).
TEST_P(DataMovementTest, EveryAlgorithmOfEachCollective) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    WithEveryAlgorithm(group, check, "broadcast", CheckBroadcast);
    WithEveryAlgorithm(group, check, "all_gather", CheckAllGather);
    WithEveryAlgorithm(group, check, "gather", CheckGatherAndScatter);
    WithEveryAlgorithm(group, check, "scatter", CheckGatherAndScatter);
    WithEveryAlgorithm(group, check, "all_to_all", CheckAllToAll);
  });
}

TEST_P(DataMovementTest, BarrierAndPointToPoint) {
  RunWorld(GetParam(), [](ProcessGroup& group, Checker& check) {
    const int n = group.size();
    const int me = group.rank();
    for (int i = 0; i < 3; ++i) check.Ran("barrier", group.Barrier());
    if (n == 1) return;
    // A ring of send/recv, twice per tag, two tags, big and small.
    for (int64_t count : {int64_t{1}, int64_t{100000}}) {
      for (int tag : {0, 7}) {
        Buffer out = Payload(DType::kFloat32, me, count, tag);
        Buffer in(DType::kFloat32, count);
        SendOptions send;
        send.tag = tag;
        RecvOptions recv;
        recv.tag = tag;
        // Odd ranks post the receive first, even ranks the send: deadlock-free on backends
        // whose receive holds up what is issued after it (nccl's stream order).
        auto post_recv = [&] {
          return group.Recv(DeviceTensor(in.data(), DType::kFloat32, count), (me + n - 1) % n,
                            recv);
        };
        auto post_send = [&] {
          return group.Send(DeviceTensor(out.data(), DType::kFloat32, count), (me + 1) % n, send);
        };
        absl::StatusOr<WorkPtr> recv_work, send_work;
        if (me % 2 == 1) {
          recv_work = post_recv();
          send_work = post_send();
        } else {
          send_work = post_send();
          recv_work = post_recv();
        }
        const std::string what = absl::StrCat("send/recv tag ", tag, " x", count);
        if (check.Ran(what + " send", send_work) && check.Ran(what + " recv", recv_work)) {
          Expect(check, what, in, PayloadValues(DType::kFloat32, (me + n - 1) % n, count, tag));
        }
      }
    }
    // The same ring as one batch, receives listed first: a batch never deadlocks, whatever
    // the order inside it (nccl launches it as one group).
    for (int64_t count : {int64_t{3}, int64_t{100000}}) {
      Buffer out = Payload(DType::kFloat32, me, count, 3);
      Buffer from_left(DType::kFloat32, count), from_right(DType::kFloat32, count);
      std::vector<PointToPointOp> batch = {
          {PointToPointOp::Kind::kRecv, DeviceTensor(from_left.data(), DType::kFloat32, count),
           (me + n - 1) % n, 3},
          {PointToPointOp::Kind::kRecv, DeviceTensor(from_right.data(), DType::kFloat32, count),
           (me + 1) % n, 4},
          {PointToPointOp::Kind::kSend, DeviceTensor(out.data(), DType::kFloat32, count),
           (me + 1) % n, 3},
          {PointToPointOp::Kind::kSend, DeviceTensor(out.data(), DType::kFloat32, count),
           (me + n - 1) % n, 4},
      };
      const std::string what = absl::StrCat("batch_isend_irecv x", count);
      if (check.Ran(what, group.BatchPointToPoint(batch))) {
        Expect(check, what + " from the left", from_left,
               PayloadValues(DType::kFloat32, (me + n - 1) % n, count, 3));
        Expect(check, what + " from the right", from_right,
               PayloadValues(DType::kFloat32, (me + 1) % n, count, 3));
      }
    }
    // Everyone sends to rank 0, which receives from any source (where the backend can).
    if (!ReceivesFromAnySource(group)) return;
    if (me != 0) {
      Buffer value(DType::kInt64, 1);
      value.Set(0, me);
      check.Ran("send to 0", group.Send(DeviceTensor(value.data(), DType::kInt64, 1), 0));
    } else {
      std::vector<int> seen(n, 0);
      for (int i = 1; i < n; ++i) {
        Buffer value(DType::kInt64, 1);
        value.Set(0, -1);
        auto work = group.RecvAnySource(DeviceTensor(value.data(), DType::kInt64, 1));
        if (!check.Ran("recv_any_source", work)) continue;
        const int source = (*work)->source_rank();
        if (source < 1 || source >= n || value.Get(0) != source) {
          check.Fail("recv_any_source: source ", source, " value ", value.Get(0));
        } else {
          ++seen[source];
        }
      }
      for (int r = 1; r < n; ++r) {
        if (seen[r] != 1) check.Fail("recv_any_source saw rank ", r, " ", seen[r], " times");
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DataMovementTest, ::testing::ValuesIn(WorldSizes()),
                         [](const auto& info) { return absl::StrCat("world", info.param); });

}  // namespace
}  // namespace plexus::conformance
