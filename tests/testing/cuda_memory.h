// Test helpers for CUDA: probing for devices without initialising CUDA in the test process
// (which forks its ranks afterwards), and CUDA managed memory for TypedBuffers.
#ifndef PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
#define PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_

#include <vector>

#include "absl/status/statusor.h"

namespace plexus::testing {

// The number of CUDA devices, asked in a forked child; the error says why there are none
// (FailedPrecondition "no CUDA device ..." without a GPU or runtime).
absl::StatusOr<int> CudaDeviceCountInChild();

// Makes `device` current and TypedBuffers made afterwards live in CUDA managed memory, which
// the host reads and writes directly once the operations on it have completed.
absl::Status UseManagedBuffers(int device);

// float32 device memory of the current device holding `values` (cudaMalloc; never freed:
// tests are short). Null without a runtime.
float* DeviceFloats(const std::vector<float>& values);
// The first `count` floats at `pointer`, copied to the host.
std::vector<float> ReadFloats(const float* pointer, size_t count);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
