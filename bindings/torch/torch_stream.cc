#include "bindings/torch/torch_stream.h"

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/api/include/torch/version.h>

namespace plexus::torch_backend {

cuda::Stream TorchCurrentStream(int device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  const c10::impl::DeviceGuardImplInterface* cuda =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  c10::Stream stream = cuda->getStream(c10::Device(c10::DeviceType::CUDA, device));
  return static_cast<cuda::Stream>(stream.native_handle());
#else
  (void)device;
  return nullptr;
#endif
}

}  // namespace plexus::torch_backend
