#include "frontend/dispatch/reconfigure.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/status_macros.h"
#include "base/store/prefix_store.h"
#include "frontend/dispatch/init.h"

namespace plexus {
namespace {

constexpr absl::string_view kHandlePrefix = "plexus:";

std::string NewHandle() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  absl::BitGen gen;
  return absl::StrCat(kHandlePrefix, host, ":", getpid(), ":",
                      absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
}

bool IsHandle(absl::string_view handle) {
  if (!absl::StartsWith(handle, kHandlePrefix)) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(handle, ':');
  return parts.size() == 4 && !parts[1].empty() && !parts[2].empty() && parts[3].size() == 16;
}

// "0=plexus:a:1:..., 1=..." for error messages.
std::string ByRank(const std::vector<std::string>& members) {
  std::vector<std::string> items;
  for (size_t rank = 0; rank < members.size(); ++rank) {
    items.push_back(absl::StrCat(rank, "=", members[rank]));
  }
  return absl::StrJoin(items, ", ");
}

}  // namespace

Reconfigurer::Reconfigurer(Options options) : options_(std::move(options)), handle_(NewHandle()) {}

absl::StatusOr<std::vector<std::string>> Reconfigurer::Members(const Request& request) const {
  const std::string op = absl::StrCat("reconfigure(uuid ", request.uuid, ")");
  if (request.handles.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": no handles; it needs one per member"));
  }
  std::vector<std::string> members = request.handles;
  if (!request.ordered) std::sort(members.begin(), members.end());
  absl::flat_hash_map<absl::string_view, size_t> seen;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!IsHandle(members[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": handle ", i, " '", members[i],
          "' is not a plexus handle (plexus:HOST:PID:NONCE, from get_reconfigure_handle)"));
    }
    auto [first, fresh] = seen.emplace(members[i], i);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": handle '", members[i],
                                                     "' is given twice (positions ", first->second,
                                                     " and ", i, "); each member once"));
    }
  }
  if (std::find(members.begin(), members.end(), handle_) == members.end()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": this process's handle '", handle_,
                                                   "' is not among the ", members.size(),
                                                   " handles; only members call it"));
  }
  return members;
}

absl::Status Reconfigurer::ClaimUuid(int64_t uuid, const std::vector<std::string>& members) {
  {
    MutexLock lock(mu_);
    if (!used_.insert(uuid).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("reconfigure: uuid ", uuid,
                       " was already used by this process; each reconfigure needs a fresh uuid"));
    }
  }
  // Every member writes, or finds, the same membership under the uuid; a different one means
  // the uuid named another configuration, whose keys must not be read again.
  const std::string membership = absl::StrJoin(members, ",");
  ASSIGN_OR_RETURN(
      std::string claimed,
      options_.store->CompareSet(absl::StrCat("reconfigure/", uuid, "/members"), "", membership));
  if (claimed != membership) {
    return absl::FailedPreconditionError(
        absl::StrCat("reconfigure: uuid ", uuid, " was already used for another membership (",
                     claimed, "); each reconfigure needs a fresh uuid"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> Reconfigurer::Reconfigure(Request request) {
  ASSIGN_OR_RETURN(std::vector<std::string> members, Members(request));
  RETURN_IF_ERROR(ClaimUuid(request.uuid, members));
  const int rank =
      static_cast<int>(std::find(members.begin(), members.end(), handle_) - members.begin());
  InitOptions init;
  init.store =
      std::make_shared<PrefixStore>(absl::StrCat("reconfigure/", request.uuid), options_.store);
  init.rank = rank;
  init.world_size = static_cast<int>(members.size());
  init.backend = options_.backend;
  init.timeout = options_.timeout;
  init.forming_timeout = request.timeout.value_or(options_.timeout);
  init.group_name = options_.name;
  init.secret = options_.secret;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group = InitProcessGroup(std::move(init));
  if (!group.ok()) {
    return absl::Status(
        group.status().code(),
        absl::StrCat("reconfigure(uuid ", request.uuid, ") as rank ", rank, " of ", members.size(),
                     ": ", group.status().message(), " (members by rank: ", ByRank(members), ")"));
  }
  return group;
}

}  // namespace plexus
