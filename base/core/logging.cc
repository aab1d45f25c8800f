#include "base/core/logging.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/core/environment.h"

namespace plexus {
namespace {

LogLevel ConfiguredLevel() {
  const char* env = ReadEnvironment("PLEXUS_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kWarning;
  std::string value = absl::AsciiStrToLower(env);
  if (value == "error") return LogLevel::kError;
  if (value == "info") return LogLevel::kInfo;
  if (value == "debug") return LogLevel::kDebug;
  return LogLevel::kWarning;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return 'E';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kDebug:
      return 'D';
  }
  return '?';
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel configured = ConfiguredLevel();
  return static_cast<int>(level) <= static_cast<int>(configured);
}

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line =
      absl::StrCat("[plexus ", std::string(1, LevelLetter(level)), " ",
                   absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ",
                   getpid(), "] ", message, "\n");
  fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace plexus
