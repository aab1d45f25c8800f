// Session: a C++ service's membership in its job, for the lifetime of one object.
//
//   auto session = plexus::Session::Join();          // torchrun, mpirun, Slurm, env://
//   if (!session.ok()) { ... (*session)->group() ... }
//   // leaving scope: a collective, deadline-bounded departure (destroy_process_group)
//
// Join() forms the default group with the same rules as init_process_group(..., "env://"):
// MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE (torchrun; TORCHELASTIC_USE_AGENT_STORE), mpirun's
// OMPI_COMM_WORLD_*, Slurm's SLURM_PROCID/SLURM_NTASKS. Thread-safe once joined; the group's
// calls follow ProcessGroup's contracts (every wait has a deadline; errors name the op and
// rank).
#ifndef PLEXUS_FRONTEND_DISPATCH_SESSION_H_
#define PLEXUS_FRONTEND_DISPATCH_SESSION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/core/device.h"
#include "base/core/options.h"
#include "frontend/dispatch/process_group.h"

namespace plexus {

struct SessionOptions {
  // Backend string ("tcp", "cpu:gloo,cuda:nccl", ...); "": PLEXUS_BACKEND, else "tcp".
  std::string backend;
  // The rendezvous and every operation's default deadline.
  absl::Duration timeout = kDefaultGroupTimeout;
  // How long the destructor waits for every rank to leave.
  absl::Duration leave_timeout = absl::Minutes(1);
  // Shared secret and eager device, as InitOptions (init.h).
  std::optional<std::string> secret;
  std::optional<Device> device_id;
};

class Session {
 public:
  // Joins the job this process was launched into. Errors say which variable is missing or
  // which rank never arrived.
  static absl::StatusOr<std::unique_ptr<Session>> Join(SessionOptions options = {});
  // Leaves (Leave()) unless already left; a failure is logged, never thrown or fatal.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  ProcessGroup& group() { return *group_; }
  const std::shared_ptr<ProcessGroup>& shared_group() const { return group_; }
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }

  // Collective departure: returns once every rank left or `leave_timeout` passed
  // (DeadlineExceeded naming how many ranks left). Later calls return OK at once.
  absl::Status Leave();

 private:
  Session(std::shared_ptr<ProcessGroup> group, absl::Duration leave_timeout)
      : group_(std::move(group)), leave_timeout_(leave_timeout) {}

  const std::shared_ptr<ProcessGroup> group_;
  const absl::Duration leave_timeout_;
  bool left_ = false;
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_SESSION_H_
