#include "bindings/torch/torch_stream.h"

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "bindings/torch/torch_compat.h"

namespace plexus::torch_backend {

cuda::Stream TorchCurrentStream(int device) {
  if (!compat::HasNativeHandle<c10::Stream>::value) return nullptr;
  const c10::impl::DeviceGuardImplInterface* cuda =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  c10::Stream stream = cuda->getStream(c10::Device(c10::DeviceType::CUDA, device));
  return static_cast<cuda::Stream>(compat::NativeStreamHandle(stream));
}

}  // namespace plexus::torch_backend
