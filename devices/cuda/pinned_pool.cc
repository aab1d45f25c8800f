#include "devices/cuda/pinned_pool.h"

#include "base/core/status_macros.h"

namespace plexus::cuda {

std::shared_ptr<PinnedPool> PinnedPool::Create(const CudaApi& api) {
  return std::shared_ptr<PinnedPool>(new PinnedPool(api));
}

PinnedPool::~PinnedPool() {
  for (auto& [size, pointers] : free_) {
    for (void* pointer : pointers) api_.FreeHost(pointer);
  }
}

absl::StatusOr<std::shared_ptr<void>> PinnedPool::Get(size_t bytes) {
  size_t size = 4096;
  while (size < bytes) size *= 2;
  void* pointer = nullptr;
  {
    MutexLock lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      pointer = it->second.back();
      it->second.pop_back();
    }
  }
  if (pointer == nullptr) {
    RETURN_IF_ERROR(CudaStatus(api_, api_.HostAlloc(&pointer, size, cudaHostAllocPortable),
                               "cudaHostAlloc for staging"));
  }
  std::weak_ptr<PinnedPool> pool = weak_from_this();
  const CudaApi* api = &api_;
  return std::shared_ptr<void>(pointer, [pool, api, size](void* released) {
    if (auto alive = pool.lock()) {
      alive->Return(released, size);
    } else {
      api->FreeHost(released);
    }
  });
}

void PinnedPool::Return(void* pointer, size_t size) {
  {
    MutexLock lock(mu_);
    std::vector<void*>& kept = free_[size];
    if (kept.size() < kKeptPerSize) {
      kept.push_back(pointer);
      return;
    }
  }
  api_.FreeHost(pointer);
}

}  // namespace plexus::cuda
