#include "tests/testing/cuda_memory.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "devices/cuda/cuda_api.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::testing {
namespace {

// cudaMalloc and cudaFree synchronise the device, and the suites make thousands of buffers:
// released ones are kept by size for the next buffer of that size.
struct KeptBuffers {
  std::mutex mu;
  absl::flat_hash_map<void*, size_t> sizes;
  absl::flat_hash_map<size_t, std::vector<void*>> free;
};

KeptBuffers& Kept() {
  static auto* kept = new KeptBuffers;
  return *kept;
}

void* DeviceAllocate(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  KeptBuffers& kept = Kept();
  {
    std::lock_guard<std::mutex> lock(kept.mu);
    std::vector<void*>& same = kept.free[bytes];
    if (!same.empty()) {
      void* pointer = same.back();
      same.pop_back();
      return pointer;
    }
  }
  auto api = cuda::LoadCudaApi();
  void* pointer = nullptr;
  if (!api.ok() || (*api)->Malloc(&pointer, bytes) != cudaSuccess) return nullptr;
  std::lock_guard<std::mutex> lock(kept.mu);
  kept.sizes[pointer] = bytes;
  return pointer;
}

void DeviceRelease(void* pointer) {
  KeptBuffers& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mu);
  auto it = kept.sizes.find(pointer);
  if (it != kept.sizes.end()) kept.free[it->second].push_back(pointer);
}

void Upload(void* device, const void* host, size_t bytes) {
  const cuda::CudaApi& api = **cuda::LoadCudaApi();
  api.Memcpy(device, host, bytes, cudaMemcpyHostToDevice);
  // From pageable memory cudaMemcpy may return before the copy lands; the operation that reads
  // it next runs on another stream.
  api.DeviceSynchronize();
}

void Download(void* host, const void* device, size_t bytes) {
  (*cuda::LoadCudaApi())->Memcpy(host, device, bytes, cudaMemcpyDeviceToHost);
}

}  // namespace

absl::StatusOr<int> CudaDeviceCountInChild() {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    absl::Status status = cuda::RequireDevice(0);
    const std::string answer =
        status.ok() ? absl::StrCat("ok ", cuda::DeviceCount()) : std::string(status.message());
    (void)!write(fds[1], answer.data(), answer.size());
    _exit(0);
  }
  close(fds[1]);
  std::string answer;
  char chunk[256];
  ssize_t got;
  while ((got = read(fds[0], chunk, sizeof(chunk))) > 0) answer.append(chunk, got);
  close(fds[0]);
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  int count = 0;
  if (answer.rfind("ok ", 0) == 0 && absl::SimpleAtoi(answer.substr(3), &count)) return count;
  if (answer.empty()) return absl::InternalError("the CUDA probe child died");
  return absl::FailedPreconditionError(answer);
}

absl::Status UseDeviceBuffers(int device) {
  auto api = cuda::LoadCudaApi();
  if (!api.ok()) return api.status();
  absl::Status set = cuda::CudaStatus(**api, (*api)->SetDevice(device), "cudaSetDevice");
  if (!set.ok()) return set;
  SetBufferMemory({&DeviceAllocate, &DeviceRelease, &Upload, &Download});
  return absl::OkStatus();
}

float* DeviceFloats(const std::vector<float>& values) {
  auto api = cuda::LoadCudaApi();
  void* pointer = nullptr;
  if (!api.ok() || (*api)->Malloc(&pointer, values.size() * sizeof(float)) != cudaSuccess) {
    return nullptr;
  }
  (*api)->Memcpy(pointer, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice);
  return static_cast<float*>(pointer);
}

std::vector<float> ReadFloats(const float* pointer, size_t count) {
  std::vector<float> values(count);
  auto api = cuda::LoadCudaApi();
  if (api.ok()) {
    (*api)->Memcpy(values.data(), pointer, count * sizeof(float), cudaMemcpyDeviceToHost);
  }
  return values;
}

void* FakeCudaHook(const char* name) {
  void* library = dlopen(std::getenv("PLEXUS_CUDART_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
  return library == nullptr ? nullptr : dlsym(library, name);
}

}  // namespace plexus::testing
