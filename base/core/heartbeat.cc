#include "base/core/heartbeat.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/core/environment.h"

namespace plexus {

absl::StatusOr<absl::Duration> ParseHeartbeat(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed == "0" || absl::AsciiStrToLower(trimmed) == "off") return absl::InfiniteDuration();
  absl::Duration interval;
  double seconds;
  if (absl::SimpleAtod(trimmed, &seconds)) {
    interval = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(trimmed, &interval)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "heartbeat interval '", text, "' is neither a duration (5s, 500ms) nor seconds"));
  }
  if (interval < kMinHeartbeat) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat interval '", text,
                                                   "' is below the minimum of ",
                                                   absl::FormatDuration(kMinHeartbeat)));
  }
  return interval;
}

absl::StatusOr<absl::Duration> HeartbeatFromEnvironment() {
  const char* text = ReadEnvironment("PLEXUS_HEARTBEAT");
  if (text == nullptr || *text == '\0') return kDefaultHeartbeat;
  absl::StatusOr<absl::Duration> interval = ParseHeartbeat(text);
  if (!interval.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PLEXUS_HEARTBEAT: ", interval.status().message()));
  }
  return interval;
}

}  // namespace plexus
