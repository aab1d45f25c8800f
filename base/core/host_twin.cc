#include "base/core/host_twin.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/mutex.h"

namespace plexus {
namespace {

struct Factories {
  Mutex mu;
  std::map<DeviceType, HostTwinFactory> by_device ABSL_GUARDED_BY(mu);
};

Factories& Registry() {
  static Factories* factories = new Factories;  // Never destroyed: used at exit too.
  return *factories;
}

}  // namespace

void RegisterHostTwinFactory(DeviceType device, HostTwinFactory factory) {
  Factories& registry = Registry();
  MutexLock lock(registry.mu);
  registry.by_device[device] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<HostTwin>> MakeHostTwin(const Tensor& tensor, bool copy_in,
                                                       absl::string_view what) {
  if (tensor.device().type == DeviceType::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a cpu tensor needs no host twin"));
  }
  if (!tensor.IsContiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the ", tensor.device().ToString(), " tensor is not contiguous"));
  }
  HostTwinFactory factory;
  {
    Factories& registry = Registry();
    MutexLock lock(registry.mu);
    auto it = registry.by_device.find(tensor.device().type);
    if (it != registry.by_device.end()) factory = it->second;
  }
  if (!factory) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": a ", tensor.device().ToString(),
        " tensor, but this build of plexus cannot move that device's memory (it was built "
        "without the device's toolkit)"));
  }
  auto twin = factory(tensor, copy_in);
  if (!twin.ok()) {
    return absl::Status(twin.status().code(), absl::StrCat(what, ": ", twin.status().message()));
  }
  return twin;
}

}  // namespace plexus
