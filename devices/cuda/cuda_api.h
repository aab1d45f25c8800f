// CudaApi: the CUDA runtime functions plexus calls, loaded from libcudart at run time.
//
// plexus never links libcudart: a binary built with the toolkit starts on machines without one,
// and inside a Python process it uses the libcudart torch has already loaded, so streams,
// events and the current device are the ones torch sees. Where the library comes from:
//   1. PLEXUS_CUDART_LIBRARY, a path, when set (and nothing else is tried);
//   2. a libcudart.so.13 already loaded in the process;
//   3. libcudart.so.13 on the loader's search path (LD_LIBRARY_PATH, rpath);
//   4. <toolkit>/lib64/libcudart.so.13 of the toolkit the build found.
// Errors become absl::Status through CudaStatus(), which maps "no device" and "no driver" to
// FailedPrecondition("no CUDA device ...") so callers can skip cleanly.
#ifndef PLEXUS_DEVICES_CUDA_CUDA_API_H_
#define PLEXUS_DEVICES_CUDA_CUDA_API_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::cuda {

struct CudaApi {
  decltype(&::cudaGetErrorName) GetErrorName;
  decltype(&::cudaGetErrorString) GetErrorString;
  decltype(&::cudaGetLastError) GetLastError;
  decltype(&::cudaRuntimeGetVersion) RuntimeGetVersion;
  decltype(&::cudaDriverGetVersion) DriverGetVersion;
  decltype(&::cudaGetDeviceCount) GetDeviceCount;
  decltype(&::cudaGetDevice) GetDevice;
  decltype(&::cudaSetDevice) SetDevice;
  decltype(&::cudaDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cudaDeviceGetStreamPriorityRange) DeviceGetStreamPriorityRange;
  decltype(&::cudaDeviceSynchronize) DeviceSynchronize;
  decltype(&::cudaStreamCreateWithPriority) StreamCreateWithPriority;
  decltype(&::cudaStreamDestroy) StreamDestroy;
  decltype(&::cudaStreamSynchronize) StreamSynchronize;
  decltype(&::cudaStreamWaitEvent) StreamWaitEvent;
  decltype(&::cudaEventCreateWithFlags) EventCreateWithFlags;
  decltype(&::cudaEventDestroy) EventDestroy;
  decltype(&::cudaEventRecord) EventRecord;
  decltype(&::cudaEventQuery) EventQuery;
  decltype(&::cudaEventSynchronize) EventSynchronize;
  decltype(&::cudaEventElapsedTime) EventElapsedTime;
  // cuda_runtime.h adds C++ overloads of these three, so their types are spelled out.
  cudaError_t (*Malloc)(void** pointer, size_t bytes);
  decltype(&::cudaFree) Free;
  cudaError_t (*HostAlloc)(void** pointer, size_t bytes, unsigned int flags);
  cudaError_t (*MallocManaged)(void** pointer, size_t bytes, unsigned int flags);
  decltype(&::cudaFreeHost) FreeHost;
  decltype(&::cudaMemcpy) Memcpy;
  decltype(&::cudaMemcpyAsync) MemcpyAsync;
  decltype(&::cudaMemsetAsync) MemsetAsync;
  decltype(&::cudaPointerGetAttributes) PointerGetAttributes;

  std::string library_path;  // Where it was loaded from.
};

// The runtime, loaded once per process; FailedPrecondition naming every place tried when there
// is none. Thread-safe.
absl::StatusOr<const CudaApi*> LoadCudaApi();

// OK for cudaSuccess; otherwise an error whose message is "<what>: <name> (<description>)".
// cudaErrorNoDevice and cudaErrorInsufficientDriver give FailedPrecondition starting with
// "no CUDA device", invalid devices and values InvalidArgument, allocation failures
// ResourceExhausted, everything else Internal.
absl::Status CudaStatus(const CudaApi& api, cudaError_t error, absl::string_view what);

// OK when `device` names a CUDA device this process can use. FailedPrecondition("no CUDA
// device ...") when the runtime is missing or sees no device; InvalidArgument when the index is
// beyond the devices present. The count is asked once and cached.
absl::Status RequireDevice(int device);

// Devices visible to this process (0 without a runtime or driver). Cached.
int DeviceCount();

// Makes `device` current on this thread for its lifetime and restores the previous one.
class DeviceGuard {
 public:
  DeviceGuard(const CudaApi& api, int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  const CudaApi& api_;
  int previous_ = -1;
};

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_CUDA_API_H_
