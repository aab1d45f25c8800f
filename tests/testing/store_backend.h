// Backends defined in tests, for exercising the dispatcher before (and independently of) the
// real backends.
//
// StoreBackend ("storetest"): moves data through the group's Store. Slow but simple and
// correct for broadcast, all_reduce (every unscaled op, with the shared kernels),
// all_gather_into_tensor, barrier, send and recv; every other collective completes with
// Unimplemented saying so. Registered globally by linking this library.
//
// RecordingBackend: does no communication; records which calls reached it.
#ifndef PLEXUS_TESTS_TESTING_STORE_BACKEND_H_
#define PLEXUS_TESTS_TESTING_STORE_BACKEND_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/interface/backend.h"

namespace plexus::testing {

inline constexpr char kStoreBackendName[] = "storetest";

class RecordingBackend : public Backend {
 public:
  RecordingBackend(std::string name, BackendCapabilities capabilities)
      : name_(std::move(name)), capabilities_(std::move(capabilities)) {}

  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

  std::string name() const override { return name_; }
  BackendCapabilities capabilities() const override { return capabilities_; }
  WorkPtr Broadcast(const Tensor&, const BroadcastOptions&) override { return Record("broadcast"); }
  WorkPtr Reduce(const Tensor&, const ReduceOptions&) override { return Record("reduce"); }
  WorkPtr AllReduce(const Tensor&, const AllReduceOptions&) override {
    return Record("all_reduce");
  }
  WorkPtr AllReduceCoalesced(absl::Span<const Tensor>, const AllReduceCoalescedOptions&) override {
    return Record("all_reduce_coalesced");
  }
  WorkPtr AllGather(absl::Span<const Tensor>, const Tensor&, const AllGatherOptions&) override {
    return Record("all_gather");
  }
  WorkPtr AllGatherIntoTensor(const Tensor&, const Tensor&, const AllGatherOptions&) override {
    return Record("all_gather_into_tensor");
  }
  WorkPtr Gather(absl::Span<const Tensor>, const Tensor&, const GatherOptions&) override {
    return Record("gather");
  }
  WorkPtr Scatter(const Tensor&, absl::Span<const Tensor>, const ScatterOptions&) override {
    return Record("scatter");
  }
  WorkPtr ReduceScatter(const Tensor&, absl::Span<const Tensor>,
                        const ReduceScatterOptions&) override {
    return Record("reduce_scatter");
  }
  WorkPtr ReduceScatterTensor(const Tensor&, const Tensor&, const ReduceScatterOptions&) override {
    return Record("reduce_scatter_tensor");
  }
  WorkPtr AllToAll(absl::Span<const Tensor>, absl::Span<const Tensor>,
                   const AllToAllOptions&) override {
    return Record("all_to_all");
  }
  WorkPtr AllToAllSingle(const Tensor&, const Tensor&, absl::Span<const int64_t> output_splits,
                         absl::Span<const int64_t> input_splits, const AllToAllOptions&) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_output_splits_.assign(output_splits.begin(), output_splits.end());
    last_input_splits_.assign(input_splits.begin(), input_splits.end());
    calls_.push_back("all_to_all_single");
    return Work::Finished(absl::OkStatus(), "all_to_all_single");
  }
  WorkPtr Barrier(const BarrierOptions&) override { return Record("barrier"); }
  WorkPtr Send(const Tensor&, int, const SendOptions&) override { return Record("send"); }
  WorkPtr Recv(const Tensor&, int, const RecvOptions&) override { return Record("recv"); }
  WorkPtr RecvAnySource(const Tensor&, const RecvOptions&) override {
    return Record("recv_any_source");
  }

  std::vector<int64_t> last_output_splits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_output_splits_;
  }

 private:
  WorkPtr Record(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(op);
    return Work::Finished(absl::OkStatus(), op);
  }

  const std::string name_;
  const BackendCapabilities capabilities_;
  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  std::vector<int64_t> last_output_splits_;
  std::vector<int64_t> last_input_splits_;
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_STORE_BACKEND_H_
