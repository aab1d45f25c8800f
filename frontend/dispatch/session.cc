#include "frontend/dispatch/session.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "frontend/dispatch/init.h"

namespace plexus {

absl::StatusOr<std::unique_ptr<Session>> Session::Join(SessionOptions options) {
  InitOptions init;
  if (!options.backend.empty()) {
    init.backend = options.backend;
  } else if (std::optional<std::string> backend = GetEnv("PLEXUS_BACKEND");
             backend.has_value() && !backend->empty()) {
    init.backend = *backend;
  }
  init.init_method = "env://";
  init.timeout = options.timeout;
  init.secret = options.secret;
  init.device_id = options.device_id;
  ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group, InitProcessGroup(std::move(init)));
  return std::unique_ptr<Session>(new Session(std::move(group), options.leave_timeout));
}

absl::Status Session::Leave() {
  if (left_) return absl::OkStatus();
  left_ = true;
  return group_->Shutdown(leave_timeout_);
}

Session::~Session() {
  absl::Status left = Leave();
  if (!left.ok()) {
    Log(LogLevel::kWarning,
        absl::StrCat("plexus session of rank ", group_->rank(), ": leaving: ", left.message()));
  }
}

}  // namespace plexus
