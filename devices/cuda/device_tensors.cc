#include "devices/cuda/device_tensors.h"

#include "absl/strings/str_cat.h"

namespace plexus::cuda {

absl::Status CheckDeviceTensors(absl::string_view op, int rank,
                                const std::vector<const Tensor*>& tensors, int* device) {
  auto prefixed = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(op, " on rank ", rank, ": ", status.message()));
  };
  for (const Tensor* tensor : tensors) {
    if (tensor->device().type != DeviceType::kCuda) {
      return prefixed(absl::InvalidArgumentError(
          absl::StrCat("expected CUDA tensors, got ", tensor->DebugString())));
    }
    if (*device < 0) *device = tensor->device().index;
    if (tensor->device().index != *device) {
      return prefixed(absl::InvalidArgumentError(absl::StrCat("tensors on cuda:", *device,
                                                              " and cuda:", tensor->device().index,
                                                              "; one call uses one device")));
    }
  }
  auto api = LoadCudaApi();
  if (!api.ok()) return prefixed(api.status());
  if (*device < 0 && (*api)->GetDevice(device) != cudaSuccess) *device = 0;
  absl::Status present = RequireDevice(*device);
  if (!present.ok()) return prefixed(present);
  // Handed host memory, a CUDA copy or kernel faults; say which tensor it was instead.
  for (const Tensor* tensor : tensors) {
    if (tensor->nbytes() == 0) continue;
    cudaPointerAttributes attributes{};
    cudaError_t asked = (*api)->PointerGetAttributes(&attributes, tensor->data());
    if (asked != cudaSuccess) (*api)->GetLastError();
    if (asked != cudaSuccess ||
        (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) ||
        attributes.device != *device) {
      return prefixed(absl::InvalidArgumentError(
          absl::StrCat(tensor->DebugString(), " does not point at memory of cuda:", *device)));
    }
  }
  return absl::OkStatus();
}

}  // namespace plexus::cuda
