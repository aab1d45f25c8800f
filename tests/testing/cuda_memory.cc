#include "tests/testing/cuda_memory.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "devices/cuda/cuda_api.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::testing {
namespace {

void* ManagedAllocate(size_t bytes) {
  auto api = cuda::LoadCudaApi();
  void* pointer = nullptr;
  if (!api.ok() || (*api)->MallocManaged(&pointer, bytes == 0 ? 1 : bytes, cudaMemAttachGlobal) !=
                       cudaSuccess) {
    return nullptr;
  }
  return pointer;
}

void ManagedRelease(void* pointer) {
  auto api = cuda::LoadCudaApi();
  if (api.ok()) (*api)->Free(pointer);
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

absl::Status UseManagedBuffers(int device) {
  auto api = cuda::LoadCudaApi();
  if (!api.ok()) return api.status();
  absl::Status set = cuda::CudaStatus(**api, (*api)->SetDevice(device), "cudaSetDevice");
  if (!set.ok()) return set;
  SetBufferMemory({&ManagedAllocate, &ManagedRelease});
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

}  // namespace plexus::testing
