// PinnedPool: page-locked host buffers for staging CUDA tensors, reused across calls because
// cudaHostAlloc costs milliseconds. Buffers come in power-of-two sizes; a few of each size are
// kept when returned. Thread-safe.
#ifndef PLEXUS_DEVICES_CUDA_PINNED_POOL_H_
#define PLEXUS_DEVICES_CUDA_PINNED_POOL_H_

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/core/mutex.h"
#include "devices/cuda/cuda_api.h"

namespace plexus::cuda {

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  static std::shared_ptr<PinnedPool> Create(const CudaApi& api);
  ~PinnedPool();

  // At least `bytes` of pinned memory, returned to the pool when the last reference goes.
  absl::StatusOr<std::shared_ptr<void>> Get(size_t bytes);

 private:
  static constexpr size_t kKeptPerSize = 4;

  explicit PinnedPool(const CudaApi& api) : api_(api) {}
  void Return(void* pointer, size_t size);

  const CudaApi& api_;
  Mutex mu_;
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_PINNED_POOL_H_
