// Parsing of backend strings: "tcp" (every device the backend serves), "cpu:tcp,cuda:nccl".
#ifndef PLEXUS_FRONTEND_DISPATCH_BACKEND_STRING_H_
#define PLEXUS_FRONTEND_DISPATCH_BACKEND_STRING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/interface/backend_registry.h"
#include "base/core/device.h"

namespace plexus {

struct DeviceBackend {
  DeviceType device;
  std::string backend;
  // The backend serves cpu only and this device's tensors go through host memory (a stager is
  // registered for the device, e.g. "cuda:tcp").
  bool staged = false;
};

// Resolves `text` against `registry`: each comma-separated item is "backend" (expanding to the
// devices it registered) or "device:backend". InvalidArgument for an unknown device, a device
// named twice, a backend that serves neither the device nor (with a stager registered for the
// device) cpu, or an empty string; NotFound for an
// unknown backend, listing the registered ones.
absl::StatusOr<std::vector<DeviceBackend>> ParseBackendString(absl::string_view text,
                                                              const BackendRegistry& registry);

// The canonical form, "cpu:tcp,cuda:nccl".
std::string BackendString(const std::vector<DeviceBackend>& mapping);

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_BACKEND_STRING_H_
