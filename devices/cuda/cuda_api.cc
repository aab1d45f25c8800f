#include "devices/cuda/cuda_api.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/environment.h"
#include "devices/cuda/dynamic_library.h"

#ifndef PLEXUS_CUDA_ROOT
#define PLEXUS_CUDA_ROOT "/usr/local/cuda"
#endif

namespace plexus::cuda {
namespace {

absl::StatusOr<CudaApi> Load() {
  std::vector<std::string> candidates;
  if (const char* path = ReadEnvironment("PLEXUS_CUDART_LIBRARY"); path != nullptr && *path) {
    candidates.push_back(path);
  } else {
    candidates = {"libcudart.so.13", PLEXUS_CUDA_ROOT "/lib64/libcudart.so.13"};
  }
  auto library = DynamicLibrary::OpenFirst("CUDA runtime", candidates);
  if (!library.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device: ", library.status().message()));
  }
  CudaApi api;
  api.library_path = library->path();
  SymbolLoader load(*library);
  load("cudaGetErrorName", &api.GetErrorName);
  load("cudaGetErrorString", &api.GetErrorString);
  load("cudaGetLastError", &api.GetLastError);
  load("cudaRuntimeGetVersion", &api.RuntimeGetVersion);
  load("cudaDriverGetVersion", &api.DriverGetVersion);
  load("cudaGetDeviceCount", &api.GetDeviceCount);
  load("cudaGetDevice", &api.GetDevice);
  load("cudaSetDevice", &api.SetDevice);
  load("cudaDeviceGetAttribute", &api.DeviceGetAttribute);
  load("cudaDeviceGetStreamPriorityRange", &api.DeviceGetStreamPriorityRange);
  load("cudaDeviceSynchronize", &api.DeviceSynchronize);
  load("cudaStreamCreateWithPriority", &api.StreamCreateWithPriority);
  load("cudaStreamDestroy", &api.StreamDestroy);
  load("cudaStreamSynchronize", &api.StreamSynchronize);
  load("cudaStreamWaitEvent", &api.StreamWaitEvent);
  load("cudaEventCreateWithFlags", &api.EventCreateWithFlags);
  load("cudaEventDestroy", &api.EventDestroy);
  load("cudaEventRecord", &api.EventRecord);
  load("cudaEventQuery", &api.EventQuery);
  load("cudaEventSynchronize", &api.EventSynchronize);
  load("cudaEventElapsedTime", &api.EventElapsedTime);
  load("cudaMalloc", &api.Malloc);
  load("cudaFree", &api.Free);
  load("cudaHostAlloc", &api.HostAlloc);
  load("cudaMallocManaged", &api.MallocManaged);
  load("cudaFreeHost", &api.FreeHost);
  load("cudaMemcpy", &api.Memcpy);
  load("cudaMemcpyAsync", &api.MemcpyAsync);
  load("cudaMemsetAsync", &api.MemsetAsync);
  load("cudaPointerGetAttributes", &api.PointerGetAttributes);
  if (!load.status().ok()) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", load.status().message()));
  }
  // The library stays loaded for the life of the process: streams and events outlive callers.
  library->Leak();
  return api;
}

}  // namespace

absl::StatusOr<const CudaApi*> LoadCudaApi() {
  static const absl::StatusOr<CudaApi>* loaded = new absl::StatusOr<CudaApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

absl::Status CudaStatus(const CudaApi& api, cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string detail =
      absl::StrCat(what, ": ", api.GetErrorName(error), " (", api.GetErrorString(error), ")");
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(absl::StrCat("no CUDA device: ", detail));
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(detail);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(detail);
    default:
      return absl::InternalError(detail);
  }
}

namespace {

struct DeviceCensus {
  absl::Status status;  // Why there are no devices, when there are none.
  int count = 0;
};

const DeviceCensus& Census() {
  static const DeviceCensus* census = [] {
    auto* result = new DeviceCensus;
    auto api = LoadCudaApi();
    if (!api.ok()) {
      result->status = api.status();
      return result;
    }
    int count = 0;
    absl::Status status = CudaStatus(**api, (*api)->GetDeviceCount(&count), "cudaGetDeviceCount");
    if (!status.ok()) {
      (*api)->GetLastError();  // Clear it, so the next call is not blamed for it.
      result->status = status;
    } else if (count == 0) {
      result->status = absl::FailedPreconditionError(
          absl::StrCat("no CUDA device: the runtime (", (*api)->library_path, ") sees none"));
    }
    result->count = count;
    return result;
  }();
  return *census;
}

}  // namespace

int DeviceCount() { return Census().count; }

absl::Status RequireDevice(int device) {
  const DeviceCensus& census = Census();
  if (census.count == 0) return census.status;
  if (device < 0 || device >= census.count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda:", device, " does not exist; this process sees ", census.count, " CUDA device(s)"));
  }
  return absl::OkStatus();
}

DeviceGuard::DeviceGuard(const CudaApi& api, int device) : api_(api) {
  if (api_.GetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) api_.SetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && api_.GetDevice(&now) == cudaSuccess && now != previous_) {
    api_.SetDevice(previous_);
  }
}

}  // namespace plexus::cuda
