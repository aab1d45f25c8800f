// Test helpers for CUDA: probing for devices without initialising CUDA in the test process
// (which forks its ranks afterwards), and CUDA managed memory for TypedBuffers.
#ifndef PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
#define PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_

#include "absl/status/statusor.h"

namespace plexus::testing {

// The number of CUDA devices, asked in a forked child; the error says why there are none
// (FailedPrecondition "no CUDA device ..." without a GPU or runtime).
absl::StatusOr<int> CudaDeviceCountInChild();

// Makes `device` current and TypedBuffers made afterwards live in CUDA managed memory, which
// the host reads and writes directly once the operations on it have completed.
absl::Status UseManagedBuffers(int device);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_CUDA_MEMORY_H_
