#include "frontend/dispatch/init.h"

#include <unistd.h>

#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/launcher_env.h"
#include "base/store/clock_offset.h"
#include "base/store/prefix_store.h"
#include "base/store/tcp_store.h"
#include "base/store/torch_store_client.h"
#include "frontend/dispatch/advertise_address.h"
#include "frontend/dispatch/backend_string.h"
#include "frontend/dispatch/flight_recorder.h"

namespace plexus {
namespace {

// The launcher init method every backend in `backend` names, if they all name the same one.
std::optional<std::string> LauncherInitMethod(const std::string& backend) {
  const BackendRegistry& registry = BackendRegistry::Global();
  auto mapping = ParseBackendString(backend, registry);
  if (!mapping.ok() || mapping->empty()) return std::nullopt;
  std::optional<std::string> common;
  for (const DeviceBackend& entry : *mapping) {
    auto registration = registry.Find(entry.backend);
    if (!registration.ok() || registration->launcher_init_method.empty()) return std::nullopt;
    if (common.has_value() && *common != registration->launcher_init_method) return std::nullopt;
    common = registration->launcher_init_method;
  }
  return common;
}

// The host of a store the caller built, when it is one that has a host.
std::string StoreHostOf(Store& store) {
  if (auto* tcp = dynamic_cast<TCPStore*>(&store)) return tcp->host();
  if (auto* torch = dynamic_cast<TorchStoreClient*>(&store)) return torch->host();
  return "";
}

// The store and this rank's place: the caller's store, or a rendezvous by init_method.
absl::StatusOr<RendezvousResult> Meet(InitOptions& options, const EnvLookup& env) {
  if (options.store != nullptr) {
    if (options.rank < 0 || options.world_size < 1) {
      return absl::InvalidArgumentError(
          "init_process_group with a store needs rank and world_size");
    }
    return RendezvousResult{options.store, options.rank, options.world_size,
                            StoreHostOf(*options.store)};
  }
  // init_process_group("mpi") under mpirun needs no MASTER_ADDR, as in torch.distributed;
  // nor does any other backend under mpirun: rank 0's store address travels over MPI.
  if (options.init_method == "env://" && !env("MASTER_ADDR").has_value()) {
    if (std::optional<std::string> launcher = LauncherInitMethod(options.backend)) {
      options.init_method = *launcher;
    } else if (UnderMpirun(env) && HasRendezvousScheme("mpi")) {
      options.init_method = "mpi://";
    }
  }
  return Rendezvous(options.init_method, options.rank, options.world_size, options.timeout, env,
                    options.secret);
}

// A second process claiming the same rank would deadlock or corrupt results later.
absl::Status ClaimRank(Store& store, int rank) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  absl::BitGen gen;
  const std::string token = absl::StrCat(host, ":", getpid(), ":", absl::Uniform<uint64_t>(gen));
  ASSIGN_OR_RETURN(std::string owner,
                   store.CompareSet(absl::StrCat("rank_owner/", rank), "", token));
  if (owner == token) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("init_process_group: rank ", rank,
                                                    " was already claimed by ", owner,
                                                    " (two processes were given the same rank)"));
}

// init_process_group(device_id=...): every backend serving the device connects now; the log
// counts from `start`, before the group was formed.
absl::Status ConnectEagerly(ProcessGroup& group, const Device& device, absl::Time start) {
  absl::StatusOr<std::shared_ptr<Backend>> backend = group.BackendFor(device.type);
  absl::Status connected = backend.ok() ? (*backend)->ConnectEagerly(device) : backend.status();
  if (!connected.ok()) {
    return absl::Status(connected.code(),
                        absl::StrCat("init_process_group(device_id=", device.ToString(), "): rank ",
                                     group.rank(), ": ", connected.message()));
  }
  if (LogEnabled(LogLevel::kInfo)) {
    Log(LogLevel::kInfo,
        absl::StrCat("init_process_group: rank ", group.rank(), " of ", group.size(),
                     ": every backend connected for ", device.ToString(), " in ",
                     absl::FormatDuration(absl::Now() - start)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> InitProcessGroup(InitOptions options,
                                                               const EnvLookup& env) {
  ASSIGN_OR_RETURN(RendezvousResult rendezvous, Meet(options, env));
  auto store = std::make_shared<PrefixStore>(options.group_name, rendezvous.store);
  RETURN_IF_ERROR(ClaimRank(*store, rendezvous.rank));
  const absl::Duration forming = options.forming_timeout.value_or(options.timeout);
  RETURN_IF_ERROR(StoreBarrier(*store, "init", rendezvous.rank, rendezvous.world_size, forming));
  // Puts every rank's flight records on the store server's clock (hang_report --timeline). A
  // store without a server (a file, torch's TCPStore) leaves the clocks as they are.
  if (absl::StatusOr<ClockOffset> clock = EstimateClockOffset(*store); clock.ok()) {
    SetFlightRecorderClock(*clock, rendezvous.store_host.empty()
                                       ? std::string("the store's server")
                                       : absl::StrCat("store server on ", rendezvous.store_host));
  }
  ProcessGroup::Config config;
  config.name = options.group_name;
  config.rank = rendezvous.rank;
  config.size = rendezvous.world_size;
  config.store = std::move(store);
  config.backend = options.backend;
  config.timeout = options.timeout;
  config.secret = options.secret;
  AdvertiseAddressOptions address_options;
  address_options.rank = rendezvous.rank;
  address_options.size = rendezvous.world_size;
  address_options.store_host = rendezvous.store_host;
  address_options.timeout = forming;
  ASSIGN_OR_RETURN(config.address, ResolveAdvertiseAddress(*config.store, address_options, env));
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::shared_ptr<ProcessGroup> group, ProcessGroup::Create(std::move(config)));
  if (options.device_id.has_value()) {
    RETURN_IF_ERROR(ConnectEagerly(*group, *options.device_id, start));
  }
  return group;
}

}  // namespace plexus
