#include "bindings/torch/torch_stream.h"

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>

#include "base/core/logging.h"
#include "bindings/torch/torch_compat.h"

namespace plexus::torch_backend {
namespace {

// c10::cuda::CUDAStream::stream() const: the cudaStream_t behind a CUDA c10::Stream, exported by
// libc10_cuda.so in every torch plexus meets (1.13 to 2.x). A CUDAStream holds exactly one
// c10::Stream, so the c10::Stream is its `this`; a non-virtual member takes `this` first.
constexpr char kCudaStreamOf[] = "_ZNK3c104cuda10CUDAStream6streamEv";
using CudaStreamOf = void* (*)(const c10::Stream*);

CudaStreamOf FindCudaStreamOf() {
  // torch loads libc10_cuda.so privately (Python's RTLD_LOCAL); ask the loaded library first.
  void* library = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  void* symbol = library != nullptr ? dlsym(library, kCudaStreamOf) : nullptr;
  if (library != nullptr) dlclose(library);  // RTLD_NOLOAD took a reference: give it back.
  if (symbol == nullptr) symbol = dlsym(RTLD_DEFAULT, kCudaStreamOf);
  if (symbol == nullptr) {
    Log(LogLevel::kWarning,
        "torch has CUDA but plexus found no c10::cuda::CUDAStream::stream() in it: collectives "
        "on CUDA tensors are ordered on the legacy default stream, which does not order "
        "torch's non-blocking streams (synchronize them before a collective)");
  }
  return reinterpret_cast<CudaStreamOf>(symbol);
}

}  // namespace

cuda::Stream TorchCurrentStream(int device) {
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return nullptr;  // torch: no CUDA.
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                                 ->getStream(c10::Device(c10::DeviceType::CUDA, device));
  if constexpr (compat::HasNativeHandle<c10::Stream>::value) {
    return static_cast<cuda::Stream>(compat::NativeStreamHandle(stream));
  }
  static const CudaStreamOf stream_of = FindCudaStreamOf();
  if (stream_of == nullptr) return nullptr;
  return static_cast<cuda::Stream>(stream_of(&stream));
}

}  // namespace plexus::torch_backend
