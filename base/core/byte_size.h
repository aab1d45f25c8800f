// One reading of a byte count for every flag and PLEXUS_* variable that takes one: digits,
// optionally followed by K, M or G (binary: 1024, 1024^2, 1024^3), with or without "B" or "iB",
// in any case ("4096", "4K", "4KiB", "64m", "1GB").
#ifndef PLEXUS_BASE_CORE_BYTE_SIZE_H_
#define PLEXUS_BASE_CORE_BYTE_SIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus {

// InvalidArgument naming `text` when it is not a byte count or overflows 64 bits.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_BYTE_SIZE_H_
