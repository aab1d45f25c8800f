#include "tools/bench_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::bench {
namespace {

using testing::TypedBuffer;

// Small integers: every partial sum is exact in every dtype up to 64 ranks (bfloat16: 16).
double Pattern(int rank, int64_t i) { return (rank % 5) + 1 + (i % 7); }

void Fill(TypedBuffer& buffer, int rank, int64_t first = 0) {
  for (int64_t i = 0; i < buffer.count(); ++i) buffer.Set(i, Pattern(rank, first + i));
  // The runners' tensors were described once: hand the values to the memory they point at
  // (in device memory the host writes a copy).
  buffer.data();
}

double Sum(int world, int64_t i) {
  double sum = 0;
  for (int r = 0; r < world; ++r) sum += Pattern(r, i);
  return sum;
}

int64_t CountWrong(const TypedBuffer& buffer, const std::function<double(int64_t)>& expected,
                   int64_t first = 0, int64_t count = -1) {
  if (count < 0) count = buffer.count();
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += buffer.Get(first + i) != expected(i);
  return wrong;
}

struct Buffers {
  std::vector<TypedBuffer> list;
  std::vector<Tensor> tensors;  // Views of list[1..] for the list-taking collectives.
};

}  // namespace

const std::vector<std::string>& KnownOps() {
  static const auto* ops = new std::vector<std::string>{
      "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter",
      "all_to_all", "gather",    "scatter", "sendrecv",   "barrier"};
  return *ops;
}

const std::vector<std::string>& ExtraOps() {
  static const auto* ops = new std::vector<std::string>{"new_group"};
  return *ops;
}

bool TakesNoSize(const std::string& op) { return op == "barrier" || op == "new_group"; }

namespace {

// Default options of a collective, blocking or not.
template <typename Options>
Options With(bool blocking) {
  Options options;
  options.blocking = blocking;
  return options;
}

// What every op's runner is built from.
struct Setup {
  ProcessGroup* pg;
  int n;   // World size.
  int me;  // This rank.
  DType dtype;
  Device device;
  bool blocking;
  Buffers* buffers;
};

// all_reduce, broadcast, reduce on data (described once, as a program reusing its buffers
// would, and as the anchors pass theirs: the per-call figure is the library's, not the
// description's).
void InPlaceRunner(const Setup& s, const std::string& op, TypedBuffer* data, Runner& runner) {
  const int n = s.n, me = s.me;
  ProcessGroup* pg = s.pg;
  const Tensor tensor = data->AsTensor(s.device);
  runner.reset = [=] { Fill(*data, me); };
  if (op == "all_reduce") {
    runner.bus_factor = 2.0 * (n - 1) / n;
    runner.issue = [pg, tensor, options = With<AllReduceOptions>(s.blocking)] {
      return pg->AllReduce(tensor, options);
    };
    runner.count_wrong = [=] { return CountWrong(*data, [=](int64_t i) { return Sum(n, i); }); };
  } else if (op == "broadcast") {
    runner.issue = [pg, tensor, options = With<BroadcastOptions>(s.blocking)] {
      return pg->Broadcast(tensor, options);
    };
    runner.count_wrong = [=] { return CountWrong(*data, [](int64_t i) { return Pattern(0, i); }); };
  } else {
    runner.issue = [pg, tensor, options = With<ReduceOptions>(s.blocking)] {
      return pg->Reduce(tensor, options);
    };
    runner.count_wrong = [=] {
      return me == 0 ? CountWrong(*data, [=](int64_t i) { return Sum(n, i); }) : 0;
    };
  }
}

// Each rank sends to the next and receives from the previous.
void SendRecvRunner(const Setup& s, TypedBuffer* data, TypedBuffer* received, Runner& runner) {
  const int n = s.n, me = s.me;
  ProcessGroup* pg = s.pg;
  const Device device = s.device;
  const int left = (me + n - 1) % n;
  runner.reset = [=] { Fill(*data, me); };
  runner.issue = [=]() -> absl::StatusOr<WorkPtr> {
    if (n == 1) return Work::Finished(absl::OkStatus());
    // Odd ranks receive first: deadlock-free where a receive holds up the stream (nccl).
    absl::StatusOr<WorkPtr> recv, send;
    if (me % 2 == 1) recv = pg->Recv(received->AsTensor(device), left);
    send = pg->Send(data->AsTensor(device), (me + 1) % n);
    if (me % 2 == 0) recv = pg->Recv(received->AsTensor(device), left);
    if (!send.ok()) return send.status();
    if (!recv.ok()) return recv.status();
    auto both = std::make_shared<Work>("sendrecv", n);
    WorkPtr send_work = *send, recv_work = *recv;
    recv_work->OnComplete([both, send_work](const absl::Status& status) {
      send_work->OnComplete([both, status](const absl::Status& sent) {
        both->Complete(status.ok() ? sent : status);
      });
    });
    return both;
  };
  runner.count_wrong = [=] {
    return n == 1 ? 0 : CountWrong(*received, [=](int64_t i) { return Pattern(left, i); });
  };
}

// What torch's new_group costs before first use: a subgroup of every rank (its store keys,
// each rank's listener and connections, and their admission), one barrier on it, and its
// shutdown. A Work that completes at once stands for the finished formation; a failed one
// fails the row with its error.
void NewGroupRunner(const Setup& s, Runner& runner) {
  const int n = s.n;
  ProcessGroup* pg = s.pg;
  const bool blocking = s.blocking;
  runner.reset = [] {};
  runner.issue = [=]() -> absl::StatusOr<WorkPtr> {
    std::vector<int> everyone(n);
    for (int r = 0; r < n; ++r) everyone[r] = r;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> formed = pg->NewGroup(everyone);
    if (!formed.ok()) return formed.status();
    if (*formed == nullptr) return absl::InternalError("new_group left this rank out");
    absl::StatusOr<WorkPtr> barrier = (*formed)->Barrier(With<BarrierOptions>(blocking));
    absl::Status status = barrier.ok() ? (*barrier)->Wait(absl::Minutes(5)) : barrier.status();
    const absl::Status shut = (*formed)->Shutdown(absl::Minutes(1));
    if (status.ok()) status = shut;
    return Work::Finished(status, "new_group", n);
  };
  runner.count_wrong = [] { return int64_t{0}; };
}

// all_gather, reduce_scatter, all_to_all: one input and one output buffer, n blocks of `per`.
void BlockRunner(const Setup& s, const std::string& op, int64_t per, Runner& runner) {
  const int n = s.n, me = s.me;
  ProcessGroup* pg = s.pg;
  const Device device = s.device;
  const bool blocking = s.blocking;
  auto& list = s.buffers->list;
  list.emplace_back(s.dtype, op == "all_gather" ? per : per * n);
  list.emplace_back(s.dtype, op == "reduce_scatter" ? per : per * n);
  TypedBuffer* input = &list[0];
  TypedBuffer* output = &list[1];
  runner.reset = [=] { Fill(*input, me); };
  const int64_t block = std::max<int64_t>(per, 1);
  if (op == "all_gather") {
    runner.issue = [=] {
      return pg->AllGatherIntoTensor(output->AsTensor(device), input->AsTensor(device),
                                     With<AllGatherOptions>(blocking));
    };
    runner.count_wrong = [=] {
      return CountWrong(*output,
                        [=](int64_t i) { return Pattern(static_cast<int>(i / block), i % block); });
    };
  } else if (op == "reduce_scatter") {
    runner.issue = [=] {
      return pg->ReduceScatterTensor(output->AsTensor(device), input->AsTensor(device),
                                     With<ReduceScatterOptions>(blocking));
    };
    runner.count_wrong = [=] {
      return CountWrong(*output, [=](int64_t i) { return Sum(n, me * per + i); });
    };
  } else {
    runner.issue = [=] {
      return pg->AllToAllSingle(output->AsTensor(device), input->AsTensor(device), {}, {},
                                With<AllToAllOptions>(blocking));
    };
    runner.count_wrong = [=] {
      // Block s came from rank s's block `me`.
      return CountWrong(*output, [=](int64_t i) {
        return Pattern(static_cast<int>(i / block), me * per + i % block);
      });
    };
  }
}

// gather, scatter: list[0] is this rank's block; list[1 + r] the root's block for rank r.
void RootedRunner(const Setup& s, const std::string& op, int64_t per, Runner& runner) {
  const int n = s.n, me = s.me;
  ProcessGroup* pg = s.pg;
  const Device device = s.device;
  const bool blocking = s.blocking;
  Buffers* b = s.buffers;
  b->list.emplace_back(s.dtype, per);
  for (int r = 0; r < n; ++r) b->list.emplace_back(s.dtype, me == 0 ? per : 0);
  if (me == 0) {
    for (int r = 0; r < n; ++r) b->tensors.push_back(b->list[1 + r].AsTensor(device));
  }
  if (op == "gather") {
    runner.reset = [=] { Fill(b->list[0], me); };
    runner.issue = [=] {
      return pg->Gather(b->tensors, b->list[0].AsTensor(device), With<GatherOptions>(blocking));
    };
    runner.count_wrong = [=] {
      int64_t wrong = 0;
      for (int r = 0; me == 0 && r < n; ++r) {
        wrong += CountWrong(b->list[1 + r], [=](int64_t i) { return Pattern(r, i); });
      }
      return wrong;
    };
    return;
  }
  runner.reset = [=] {
    for (int r = 0; me == 0 && r < n; ++r) Fill(b->list[1 + r], r, 1000);
  };
  runner.issue = [=] {
    return pg->Scatter(b->list[0].AsTensor(device), b->tensors, With<ScatterOptions>(blocking));
  };
  runner.count_wrong = [=] {
    return CountWrong(b->list[0], [=](int64_t i) { return Pattern(me, 1000 + i); });
  };
}

}  // namespace

absl::StatusOr<Runner> MakeRunner(const std::string& op, ProcessGroup& group, DType dtype,
                                  int64_t bytes, Device device, bool blocking) {
  const int n = group.size();
  const int64_t element = static_cast<int64_t>(DTypeSize(dtype));
  auto state = std::make_shared<Buffers>();
  Runner runner;
  runner.buffers = state;
  const Setup setup{&group, n, group.rank(), dtype, device, blocking, state.get()};
  if (op == "all_reduce" || op == "broadcast" || op == "reduce" || op == "sendrecv") {
    const int64_t count = bytes / element;
    runner.count = count;
    runner.bytes = count * element;
    state->list.emplace_back(dtype, count);
    if (op != "sendrecv") {
      InPlaceRunner(setup, op, &state->list[0], runner);
      return runner;
    }
    state->list.emplace_back(dtype, count);
    SendRecvRunner(setup, &state->list[0], &state->list[1], runner);
    return runner;
  }
  if (op == "barrier") {
    runner.reset = [] {};
    runner.issue = [pg = &group, blocking] { return pg->Barrier(With<BarrierOptions>(blocking)); };
    runner.count_wrong = [] { return int64_t{0}; };
    return runner;
  }
  if (op == "new_group") {
    NewGroupRunner(setup, runner);
    return runner;
  }
  // The rest split a total of `bytes` into n blocks of `per` elements.
  const int64_t per = bytes / element / n;
  runner.count = per * n;
  runner.bytes = per * n * element;
  runner.bus_factor = static_cast<double>(n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") {
    BlockRunner(setup, op, per, runner);
  } else if (op == "gather" || op == "scatter") {
    RootedRunner(setup, op, per, runner);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown op '", op,
                                                   "'; known: ", absl::StrJoin(KnownOps(), ", "),
                                                   ", ", absl::StrJoin(ExtraOps(), ", ")));
  }
  return runner;
}

}  // namespace plexus::bench
