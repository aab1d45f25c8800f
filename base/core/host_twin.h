// HostTwin: a host copy of a tensor that lives on another device, for code that moves host
// memory only (the elastic communicator). Device support registers how to make one
// (backends/cuda_staging does for CUDA, through pinned memory); a build without it refuses
// such tensors with a clear error instead of touching device memory from the host.
#ifndef PLEXUS_BASE_CORE_HOST_TWIN_H_
#define PLEXUS_BASE_CORE_HOST_TWIN_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/core/device.h"
#include "base/core/tensor.h"

namespace plexus {

class HostTwin {
 public:
  virtual ~HostTwin() = default;
  // The host bytes: the tensor's nbytes, contiguous.
  virtual void* data() = 0;
  // Writes the host bytes into the device tensor; returns once they are there.
  virtual absl::Status CopyBack() = 0;
};

// Makes the twin of a contiguous tensor of the factory's device; with `copy_in` the twin holds
// the tensor's bytes, read after the work queued before on the caller's current stream.
using HostTwinFactory =
    std::function<absl::StatusOr<std::unique_ptr<HostTwin>>(const Tensor& tensor, bool copy_in)>;

// Registers the factory of `device` (at static initialisation; the last one wins).
void RegisterHostTwinFactory(DeviceType device, HostTwinFactory factory);

// The twin of `tensor` (not a cpu one). InvalidArgument naming `what` for a cpu or
// non-contiguous tensor; FailedPrecondition naming `what` and the device when this build has
// no support for it.
absl::StatusOr<std::unique_ptr<HostTwin>> MakeHostTwin(const Tensor& tensor, bool copy_in,
                                                       absl::string_view what);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_HOST_TWIN_H_
