#include "tests/testing/store_backend.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "algorithms/reduce_kernels.h"
#include "backends/interface/backend_registry.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/rendezvous.h"

namespace plexus::testing {

using algorithms::ReduceInto;

namespace {

class StoreBackend : public Backend {
 public:
  explicit StoreBackend(const BackendContext& context) : context_(context) {}

  std::string name() const override { return kStoreBackendName; }
  BackendCapabilities capabilities() const override {
    BackendCapabilities caps;
    caps.devices = {DeviceType::kCpu};
    caps.dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt8};
    return caps;
  }

  WorkPtr Run(const Collective& call) override {
    switch (call.kind) {
      case CollectiveKind::kBroadcast:
        return Broadcast(call.tensor(), call.root);
      case CollectiveKind::kAllReduce:
        return AllReduce(call.tensor(), call.op);
      case CollectiveKind::kAllGatherIntoTensor:
        return AllGatherIntoTensor(call.output(), call.input());
      case CollectiveKind::kBarrier:
        return Barrier(call.timeout);
      case CollectiveKind::kSend:
        return Send(call.input(), call.peer, call.tag);
      case CollectiveKind::kRecv:
        return Recv(call.output(), call.peer, call.tag);
      case CollectiveKind::kReduce:
      case CollectiveKind::kAllReduceCoalesced:
      case CollectiveKind::kAllGather:
      case CollectiveKind::kGather:
      case CollectiveKind::kScatter:
      case CollectiveKind::kReduceScatter:
      case CollectiveKind::kAllToAll:
      case CollectiveKind::kReduceScatterTensor:
      case CollectiveKind::kAllToAllSingle:
      case CollectiveKind::kRecvAnySource:
        break;
    }
    return Missing(std::string(call.name()));
  }

 private:
  WorkPtr Broadcast(const Tensor& tensor, int root) {
    const std::string key = NextKey("broadcast");
    absl::Status status;
    if (context_.rank == root) {
      status = store().Set(key, Bytes(tensor));
    } else {
      auto value = store().Get(key);
      status = value.ok() ? CopyIn(tensor, *value) : value.status();
    }
    return Done("broadcast", status);
  }

  WorkPtr AllReduce(const Tensor& tensor, const ReduceOp& op) {
    const std::string key = NextKey("all_reduce");
    auto values = Exchange(key, Bytes(tensor));
    if (!values.ok()) return Done("all_reduce", values.status());
    if (op.kind == ReduceOpKind::kAvg || op.kind == ReduceOpKind::kPremulSum) {
      return Done("all_reduce", absl::UnimplementedError(
                                    "the storetest backend does not scale (AVG, PREMUL_SUM)"));
    }
    // Reduce in rank order on every rank, with the shared kernels: bit-identical results.
    std::string acc = (*values)[0];
    for (int r = 1; r < context_.size; ++r) {
      ReduceInto(acc.data(), (*values)[r].data(), tensor.numel(), tensor.dtype(), op.kind);
    }
    return Done("all_reduce", CopyIn(tensor, acc));
  }

  WorkPtr AllGatherIntoTensor(const Tensor& output, const Tensor& input) {
    auto values = Exchange(NextKey("all_gather"), Bytes(input));
    if (!values.ok()) return Done("all_gather_into_tensor", values.status());
    std::string all;
    for (const std::string& value : *values) all += value;
    return Done("all_gather_into_tensor", CopyIn(output, all));
  }

  WorkPtr Barrier(absl::Duration timeout) {
    return Done("barrier",
                StoreBarrier(store(), "storetest_barrier", context_.rank, context_.size, timeout));
  }

  WorkPtr Send(const Tensor& tensor, int dst, int tag) {
    const std::string key = PairKey(context_.rank, dst, tag, sent_);
    return Done("send", store().Set(key, Bytes(tensor)));
  }

  WorkPtr Recv(const Tensor& tensor, int src, int tag) {
    const std::string key = PairKey(src, context_.rank, tag, received_);
    auto value = store().Get(key);
    return Done("recv", value.ok() ? CopyIn(tensor, *value) : value.status());
  }

  Store& store() { return *context_.store; }
  static std::string Bytes(const Tensor& tensor) {
    return std::string(reinterpret_cast<const char*>(tensor.data()), tensor.nbytes());
  }
  static absl::Status CopyIn(const Tensor& tensor, const std::string& bytes) {
    if (bytes.size() != tensor.nbytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "storetest: received ", bytes.size(), " bytes for a ", tensor.nbytes(), "-byte tensor"));
    }
    if (!bytes.empty()) std::memcpy(tensor.data(), bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  std::string NextKey(absl::string_view op) {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrCat(op, "/", sequence_++);
  }
  std::string PairKey(int src, int dst, int tag, std::map<std::string, int>& counters) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string pair = absl::StrCat("p2p/", src, "/", dst, "/", tag);
    return absl::StrCat(pair, "/", counters[pair]++);
  }
  // Publishes this rank's bytes under `key` and returns every rank's, in rank order.
  absl::StatusOr<std::vector<std::string>> Exchange(const std::string& key,
                                                    const std::string& mine) {
    RETURN_IF_ERROR(store().Set(absl::StrCat(key, "/", context_.rank), mine));
    std::vector<std::string> keys;
    for (int r = 0; r < context_.size; ++r) keys.push_back(absl::StrCat(key, "/", r));
    return store().MultiGet(keys);
  }
  WorkPtr Done(const std::string& op, absl::Status status) {
    return Work::Finished(std::move(status), op, context_.size);
  }
  WorkPtr Missing(const std::string& op) {
    return Done(op, absl::UnimplementedError(
                        absl::StrCat("the storetest backend does not implement ", op)));
  }

  const BackendContext context_;
  std::mutex mu_;
  int64_t sequence_ = 0;
  std::map<std::string, int> sent_;
  std::map<std::string, int> received_;
};

const BackendRegisterer kRegisterStoreBackend({
    kStoreBackendName,
    {DeviceType::kCpu},
    [](const BackendContext& context) -> absl::StatusOr<std::shared_ptr<Backend>> {
      return std::make_shared<StoreBackend>(context);
    },
});

}  // namespace
}  // namespace plexus::testing
