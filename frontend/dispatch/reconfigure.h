// Reconfigurable membership, torch's fault-tolerance contract (c10d's reconfigure): each
// process names itself with a handle; peers exchange handles out of band (a store, a
// coordinator); Reconfigure forms a group of exactly the processes the handles name, under a
// uuid no earlier configuration used. The group is formed as init_process_group forms the
// world (init.h: each rank claimed once, every member waited for, backends created), in a
// store namespace of its own per uuid, so a replacement process started later joins by its
// handle and nothing of an older configuration is read again.
#ifndef PLEXUS_FRONTEND_DISPATCH_RECONFIGURE_H_
#define PLEXUS_FRONTEND_DISPATCH_RECONFIGURE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "base/core/mutex.h"
#include "frontend/dispatch/process_group.h"

namespace plexus {

class Reconfigurer {
 public:
  struct Options {
    std::shared_ptr<Store> store;  // Shared by every process that may ever be a member.
    std::string backend = "tcp";   // Backend string of every group formed.
    std::string name = "world";    // The groups' name (flight records, errors).
    absl::Duration timeout = kDefaultGroupTimeout;  // The groups' default operation timeout.
    std::optional<std::string> secret;              // As InitOptions::secret.
  };
  struct Request {
    int64_t uuid = 0;  // Never used before by any process on this store.
    // One handle per member. `ordered`: rank = position; otherwise plexus chooses (sorted).
    std::vector<std::string> handles;
    bool ordered = true;
    std::optional<absl::Duration> timeout;  // For forming; unset: Options::timeout.
  };

  explicit Reconfigurer(Options options);

  // "plexus:<host>:<pid>:<random>": this process, distinct from every other one (two started
  // with the same rank, or a replacement of a lost one, have different handles). Constant.
  const std::string& handle() const { return handle_; }

  // Forms the group the request names; collective over its members, each passing the same
  // uuid and handles. Errors: InvalidArgument for an empty, repeated or foreign handle or one
  // list without this process's handle; FailedPrecondition when the uuid was already used
  // ("already used": by this process, or on the store for another membership);
  // DeadlineExceeded naming the members (rank and handle) that never came.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> Reconfigure(Request request);

 private:
  // The members in rank order, checked; InvalidArgument naming what is wrong.
  absl::StatusOr<std::vector<std::string>> Members(const Request& request) const;
  // Claims `uuid` for this process and, on the store, for `members`.
  absl::Status ClaimUuid(int64_t uuid, const std::vector<std::string>& members);

  const Options options_;
  const std::string handle_;
  Mutex mu_;
  absl::flat_hash_set<int64_t> used_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_RECONFIGURE_H_
