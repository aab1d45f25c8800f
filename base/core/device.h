// Device: where a tensor's memory lives ("cpu", "cuda:N").
#ifndef PLEXUS_BASE_CORE_DEVICE_H_
#define PLEXUS_BASE_CORE_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus {

enum class DeviceType { kCpu, kCuda };

inline constexpr DeviceType kAllDeviceTypes[] = {DeviceType::kCpu, DeviceType::kCuda};

absl::string_view DeviceTypeName(DeviceType type);  // "cpu", "cuda"

// Parses a device type name; the error lists the known ones.
absl::StatusOr<DeviceType> ParseDeviceType(absl::string_view name);

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;  // Ordinal within the type; always 0 for cpu.

  static Device Cpu() { return Device{}; }
  static Device Cuda(int index) { return Device{DeviceType::kCuda, index}; }

  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
  std::string ToString() const;  // "cpu", "cuda:1"
};

// Parses "cpu", "cuda" (index 0) or "cuda:N".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_DEVICE_H_
