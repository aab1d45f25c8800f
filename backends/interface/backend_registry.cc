#include "backends/interface/backend_registry.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/logging.h"

namespace plexus {

BackendRegistry& BackendRegistry::Global() {
  static auto* registry = new BackendRegistry();
  return *registry;
}

absl::Status BackendRegistry::Register(BackendRegistration registration) {
  const std::string& name = registration.name;
  if (name.empty() || name != absl::AsciiStrToLower(name) ||
      name.find_first_of(":, ") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend name '", name, "' must be non-empty, lower case, without ':', ',' or spaces"));
  }
  if (registration.devices.empty() || !registration.factory) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", name, "' must list its devices and provide a factory"));
  }
  MutexLock lock(mu_);
  if (registrations_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("backend '", name, "' is already registered"));
  }
  registrations_.emplace(name, std::move(registration));
  return absl::OkStatus();
}

bool BackendRegistry::Unregister(const std::string& name) {
  MutexLock lock(mu_);
  return registrations_.erase(name) > 0;
}

absl::StatusOr<BackendRegistration> BackendRegistry::Find(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = registrations_.find(name);
  if (it != registrations_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [known, unused] : registrations_) names.push_back(known);
  std::string listing = names.empty() ? "(none)" : absl::StrJoin(names, ", ");
  for (const auto& [absent, reason] : absent_) absl::StrAppend(&listing, "; not built: ", absent);
  if (auto why = absent_.find(name); why != absent_.end()) {
    return absl::NotFoundError(absl::StrCat("backend '", name, "' is not in this build: ",
                                            why->second, "; registered backends: ", listing));
  }
  return absl::NotFoundError(
      absl::StrCat("unknown backend '", name, "'; registered backends: ", listing));
}

void BackendRegistry::RegisterAbsent(std::string name, std::string reason) {
  MutexLock lock(mu_);
  absent_[std::move(name)] = std::move(reason);
}

std::vector<std::pair<std::string, std::string>> BackendRegistry::Absent() const {
  MutexLock lock(mu_);
  return {absent_.begin(), absent_.end()};
}

std::vector<std::string> BackendRegistry::Names() const {
  MutexLock lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, unused] : registrations_) names.push_back(name);
  return names;
}

absl::Status BackendRegistry::RegisterStaging(DeviceType device, StagingFactory factory) {
  MutexLock lock(mu_);
  if (!stagers_.emplace(device, std::move(factory)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("a stager for ", DeviceTypeName(device), " is already registered"));
  }
  return absl::OkStatus();
}

StagingFactory BackendRegistry::FindStaging(DeviceType device) const {
  MutexLock lock(mu_);
  auto it = stagers_.find(device);
  return it == stagers_.end() ? nullptr : it->second;
}

AbsentBackendNote::AbsentBackendNote(std::string name, std::string reason) {
  BackendRegistry::Global().RegisterAbsent(std::move(name), std::move(reason));
}

StagingRegisterer::StagingRegisterer(DeviceType device, StagingFactory factory) {
  absl::Status status = BackendRegistry::Global().RegisterStaging(device, std::move(factory));
  if (!status.ok()) Log(LogLevel::kWarning, status.message());
}

BackendRegisterer::BackendRegisterer(BackendRegistration registration) {
  absl::Status status = BackendRegistry::Global().Register(std::move(registration));
  if (!status.ok()) Log(LogLevel::kError, status.message());
}

}  // namespace plexus
