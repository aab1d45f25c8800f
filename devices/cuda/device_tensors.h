// Checks that the tensors of one call can be handed to CUDA: all on one CUDA device that
// exists, each pointing at device (or managed) memory of that device.
#ifndef PLEXUS_DEVICES_CUDA_DEVICE_TENSORS_H_
#define PLEXUS_DEVICES_CUDA_DEVICE_TENSORS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/core/tensor.h"
#include "devices/cuda/cuda_api.h"

namespace plexus::cuda {

// `device` comes in as the preferred device (-1: the tensors') and leaves resolved; with no
// tensors and no preference it is the current device. Errors name `op` and `rank`:
// InvalidArgument for a cpu tensor, two devices, a missing device or host memory;
// FailedPrecondition "no CUDA device" when there is no GPU or runtime.
absl::Status CheckDeviceTensors(absl::string_view op, int rank,
                                const std::vector<const Tensor*>& tensors, int* device);

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_DEVICE_TENSORS_H_
