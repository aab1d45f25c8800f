// Minimal leveled logging to stderr. The level comes from PLEXUS_LOG_LEVEL (error, warning,
// info, debug; default warning). Used for events nobody returns a status for, such as a server
// closing a misbehaving connection.
#ifndef PLEXUS_BASE_CORE_LOGGING_H_
#define PLEXUS_BASE_CORE_LOGGING_H_

#include "absl/strings/string_view.h"

namespace plexus {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

bool LogEnabled(LogLevel level);
// Writes "[plexus W 12:00:00.123 pid] message" when `level` is enabled.
void Log(LogLevel level, absl::string_view message);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_LOGGING_H_
