// Test helpers for CUDA: probing for devices without initialising CUDA in the test process
// (which forks its ranks afterwards), and CUDA device memory for TypedBuffers.
#ifndef PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
#define PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_

#include <vector>

#include "absl/status/statusor.h"

namespace plexus::testing {

// The number of CUDA devices, asked in a forked child; the error says why there are none
// (FailedPrecondition "no CUDA device ..." without a GPU or runtime).
absl::StatusOr<int> CudaDeviceCountInChild();

// Makes `device` current and TypedBuffers made afterwards live in its memory (cudaMalloc), with
// a host copy for setting and reading elements. Not managed memory: on some machines every
// host access to it faults (4 MiB set and read element by element took over two minutes on
// an H200 under Firecracker, 2026-11-26). Released buffers are kept for the next of their size
// (cudaFree synchronises the device).
absl::Status UseDeviceBuffers(int device);

// float32 device memory of the current device holding `values` (cudaMalloc; never freed:
// tests are short). Null without a runtime.
float* DeviceFloats(const std::vector<float>& values);
// The first `count` floats at `pointer`, copied to the host.
std::vector<float> ReadFloats(const float* pointer, size_t count);

// A test hook of the fake CUDA runtime (tests/fake_cuda, e.g. "fakeCudaHoldStream") where the
// loaded runtime is the fake; null otherwise.
void* FakeCudaHook(const char* name);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
