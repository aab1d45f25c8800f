#include "frontend/dispatch/backend_string.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

std::string DeviceList(const std::vector<DeviceType>& devices) {
  std::vector<std::string> names;
  for (DeviceType device : devices) names.emplace_back(DeviceTypeName(device));
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::vector<DeviceBackend>> ParseBackendString(absl::string_view text,
                                                              const BackendRegistry& registry) {
  std::vector<DeviceBackend> mapping;
  auto add = [&](DeviceType device, const std::string& backend) -> absl::Status {
    for (const DeviceBackend& existing : mapping) {
      if (existing.device == device) {
        return absl::InvalidArgumentError(absl::StrCat("backend string '", text, "' names device ",
                                                       DeviceTypeName(device), " twice"));
      }
    }
    mapping.push_back({device, backend});
    return absl::OkStatus();
  };
  for (absl::string_view raw_item : absl::StrSplit(text, ',')) {
    const std::string item = absl::AsciiStrToLower(absl::StripAsciiWhitespace(raw_item));
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("backend string '", text,
                                                     "' has an empty item; expected e.g. ",
                                                     "\"tcp\" or \"cpu:tcp,cuda:nccl\""));
    }
    const size_t colon = item.find(':');
    const std::string backend = colon == std::string::npos ? item : item.substr(colon + 1);
    auto registration = registry.Find(backend);
    if (!registration.ok()) {
      return absl::Status(
          registration.status().code(),
          absl::StrCat("backend string '", text, "': ", registration.status().message()));
    }
    if (colon == std::string::npos) {
      for (DeviceType device : registration->devices) RETURN_IF_ERROR(add(device, backend));
      continue;
    }
    auto device = ParseDeviceType(item.substr(0, colon));
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend string '", text, "': ", device.status().message()));
    }
    const auto& devices = registration->devices;
    auto serves = [&](DeviceType type) {
      return std::find(devices.begin(), devices.end(), type) != devices.end();
    };
    if (serves(*device)) {
      RETURN_IF_ERROR(add(*device, backend));
      continue;
    }
    if (serves(DeviceType::kCpu) && registry.FindStaging(*device) != nullptr) {
      RETURN_IF_ERROR(add(*device, backend));
      mapping.back().staged = true;
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("backend string '", text, "': backend '", backend, "' does not serve device ",
                     DeviceTypeName(*device), " (it serves: ", DeviceList(devices), ")"));
  }
  return mapping;
}

std::string BackendString(const std::vector<DeviceBackend>& mapping) {
  return absl::StrJoin(mapping, ",", [](std::string* out, const DeviceBackend& entry) {
    absl::StrAppend(out, DeviceTypeName(entry.device), ":", entry.backend);
  });
}

}  // namespace plexus
