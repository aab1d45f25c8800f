#include "base/core/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace plexus {

absl::string_view DeviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return "cuda";
  }
  return "unknown";
}

absl::StatusOr<DeviceType> ParseDeviceType(absl::string_view name) {
  std::string known;
  for (DeviceType type : kAllDeviceTypes) {
    if (DeviceTypeName(type) == name) return type;
    absl::StrAppend(&known, known.empty() ? "" : ", ", DeviceTypeName(type));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", name, "'; known devices: ", known));
}

std::string Device::ToString() const {
  if (type == DeviceType::kCpu) return "cpu";
  return absl::StrCat(DeviceTypeName(type), ":", index);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  absl::string_view type_name = text;
  int index = 0;
  size_t colon = text.find(':');
  if (colon != absl::string_view::npos) {
    type_name = text.substr(0, colon);
    if (!absl::SimpleAtoi(text.substr(colon + 1), &index) || index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad device '", text, "': the index must be a non-negative integer"));
    }
  }
  auto type = ParseDeviceType(type_name);
  if (!type.ok()) return type.status();
  if (*type == DeviceType::kCpu && index != 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad device '", text, "': cpu has no index"));
  }
  return Device{*type, index};
}

}  // namespace plexus
