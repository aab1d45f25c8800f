// Host twins of CUDA tensors (base/core/host_twin.h), for the elastic communicator: pinned
// buffers from a pool, copied on the caller's current stream and waited for, so a twin holds
// what the stream's earlier work wrote and a copy back is in place when CopyBack returns.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/host_twin.h"
#include "base/core/status_macros.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/current_stream.h"
#include "devices/cuda/pinned_pool.h"

namespace plexus::cuda_staging {
namespace {

class CudaHostTwin : public HostTwin {
 public:
  CudaHostTwin(const cuda::CudaApi& api, std::shared_ptr<void> host, void* device_data,
               size_t bytes, int device, cuda::Stream stream)
      : api_(api),
        host_(std::move(host)),
        device_data_(device_data),
        bytes_(bytes),
        device_(device),
        stream_(stream) {}

  void* data() override { return host_.get(); }

  absl::Status CopyBack() override {
    return Copy(device_data_, host_.get(), cudaMemcpyHostToDevice, "copying a host twin back");
  }

  absl::Status CopyIn() {
    return Copy(host_.get(), device_data_, cudaMemcpyDeviceToHost, "copying a tensor to its twin");
  }

 private:
  absl::Status Copy(void* to, const void* from, cudaMemcpyKind kind, const char* what) {
    if (bytes_ == 0) return absl::OkStatus();
    cuda::DeviceGuard guard(api_, device_);
    auto stream = reinterpret_cast<cudaStream_t>(stream_);
    RETURN_IF_ERROR(cuda::CudaStatus(api_, api_.MemcpyAsync(to, from, bytes_, kind, stream), what));
    return cuda::CudaStatus(api_, api_.StreamSynchronize(stream), what);
  }

  const cuda::CudaApi& api_;
  const std::shared_ptr<void> host_;
  void* const device_data_;
  const size_t bytes_;
  const int device_;
  const cuda::Stream stream_;
};

absl::StatusOr<std::unique_ptr<HostTwin>> MakeCudaTwin(const Tensor& tensor, bool copy_in) {
  ASSIGN_OR_RETURN(const cuda::CudaApi* api, cuda::LoadCudaApi());
  const int device = tensor.device().index;
  RETURN_IF_ERROR(cuda::RequireDevice(device));
  static const std::shared_ptr<cuda::PinnedPool> pool = cuda::PinnedPool::Create(*api);
  ASSIGN_OR_RETURN(std::shared_ptr<void> host, pool->Get(std::max<size_t>(tensor.nbytes(), 1)));
  auto twin = std::make_unique<CudaHostTwin>(*api, std::move(host), tensor.data(), tensor.nbytes(),
                                             device, cuda::CurrentStream(device));
  if (copy_in) RETURN_IF_ERROR(twin->CopyIn());
  return std::unique_ptr<HostTwin>(std::move(twin));
}

const bool kRegistered = [] {
  RegisterHostTwinFactory(DeviceType::kCuda, &MakeCudaTwin);
  return true;
}();

}  // namespace
}  // namespace plexus::cuda_staging
