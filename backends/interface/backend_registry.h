// BackendRegistry: maps backend names ("tcp", "gloo", or a name registered by code outside this
// repository) to factories. Registration happens at run time, typically from a static
// BackendRegisterer in the backend's own library; frontend code never names a backend.
#ifndef PLEXUS_BACKENDS_INTERFACE_BACKEND_REGISTRY_H_
#define PLEXUS_BACKENDS_INTERFACE_BACKEND_REGISTRY_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "backends/interface/backend.h"
#include "base/core/mutex.h"

namespace plexus {

using BackendFactory =
    std::function<absl::StatusOr<std::shared_ptr<Backend>>(const BackendContext& context)>;

struct BackendRegistration {
  std::string name;                 // Lower-case identifier used in backend strings.
  std::vector<DeviceType> devices;  // Devices "name" alone expands to.
  BackendFactory factory;
  // The init method to use when the caller leaves init_method at env:// and MASTER_ADDR is not
  // set - a launcher's own rendezvous, e.g. "mpi://" for a backend that only runs under mpirun.
  // Empty: none.
  std::string launcher_init_method;
};

// Wraps a backend serving cpu so it serves `device` too, by staging that device's tensors
// through host memory (backends/cuda_staging for CUDA). `host` is the group's instance of the
// wrapped backend.
using StagingFactory = std::function<absl::StatusOr<std::shared_ptr<Backend>>(
    std::shared_ptr<Backend> host, const BackendContext& context)>;

class BackendRegistry {
 public:
  // The process-wide registry.
  static BackendRegistry& Global();

  // AlreadyExists if the name is taken; InvalidArgument for a malformed registration.
  absl::Status Register(BackendRegistration registration);
  // Returns whether a backend of that name was registered.
  bool Unregister(const std::string& name);
  absl::StatusOr<BackendRegistration> Find(const std::string& name) const;
  std::vector<std::string> Names() const;  // Sorted.

  // Notes that backend `name` is left out of this build and why (e.g. nccl where the build
  // found no CUDA toolkit): Names() does not list it, and Find() - so every backend string
  // naming it - says why it is missing.
  void RegisterAbsent(std::string name, std::string reason);
  // The backends noted absent, with their reasons, sorted by name.
  std::vector<std::pair<std::string, std::string>> Absent() const;

  // At most one stager per device; AlreadyExists otherwise.
  absl::Status RegisterStaging(DeviceType device, StagingFactory factory);
  // The stager for `device`, or null.
  StagingFactory FindStaging(DeviceType device) const;

 private:
  mutable Mutex mu_;
  absl::btree_map<std::string, BackendRegistration> registrations_ ABSL_GUARDED_BY(mu_);
  absl::btree_map<DeviceType, StagingFactory> stagers_ ABSL_GUARDED_BY(mu_);
  absl::btree_map<std::string, std::string> absent_ ABSL_GUARDED_BY(mu_);
};

// Registers a backend when constructed; declare one at namespace scope in a backend's .cc.
// A failed registration (duplicate name) is logged, not fatal.
class BackendRegisterer {
 public:
  explicit BackendRegisterer(BackendRegistration registration);
};

// Notes an absent backend when constructed (namespace scope, like BackendRegisterer).
class AbsentBackendNote {
 public:
  AbsentBackendNote(std::string name, std::string reason);
};

// Registers a stager when constructed (namespace scope, like BackendRegisterer).
class StagingRegisterer {
 public:
  StagingRegisterer(DeviceType device, StagingFactory factory);
};

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_INTERFACE_BACKEND_REGISTRY_H_
