#include "frontend/elastic/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/collective_context.h"
#include "base/auth/mutual_auth.h"
#include "base/core/deadline.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"
#include "base/net/route.h"
#include "base/store/tcp_store.h"
#include "base/transport/transport.h"
#include "base/transport/transport_registry.h"
#include "frontend/elastic/backup_pool.h"
#include "frontend/elastic/communicator_op.h"
#include "frontend/elastic/master_link.h"
#include "frontend/elastic/master_node.h"
#include "frontend/elastic/op_runner.h"

namespace plexus::elastic {

using algorithms::DescribeSignature;

namespace {

// What every epoch's data connections share: the deadline, how mismatches are named, and the
// secret and TLS the master's connections use too.
TransportSetup MeshSetup(const CommunicatorOptions& options, absl::Duration connect_timeout) {
  TransportSetup setup;
  setup.connect_timeout = connect_timeout;
  setup.describe_signature = DescribeSignature;
  setup.secret = options.secret;
  setup.tls = options.tls;
  return setup;
}

// How long one Connect() keeps retrying a master that refuses connections (not yet started).
constexpr absl::Duration kReachMasterTimeout = absl::Seconds(5);

// An unset timeout: PLEXUS_ELASTIC_TIMEOUT (its default is in base/core/environment.cc).
absl::StatusOr<absl::Duration> ResolveTimeout(std::optional<absl::Duration> set, const char* what) {
  absl::Duration timeout;
  if (set.has_value()) {
    timeout = *set;
  } else {
    ASSIGN_OR_RETURN(timeout, EnvironmentSeconds("PLEXUS_ELASTIC_TIMEOUT"));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic communicator ", what, " must be positive, not ", absl::FormatDuration(timeout)));
  }
  return timeout;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(CommunicatorOptions options) {
  ASSIGN_OR_RETURN(auto host_port, ParseHostPort(options.master_address));
  ASSIGN_OR_RETURN(options.operation_timeout,
                   ResolveTimeout(options.operation_timeout, "operation_timeout"));
  ASSIGN_OR_RETURN(options.accept_timeout,
                   ResolveTimeout(options.accept_timeout, "accept_timeout"));
  if (options.peer_group < 0 || options.peer_group > 0xffffffffll) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer group ", options.peer_group, " is not a 32-bit unsigned number"));
  }
  ASSIGN_OR_RETURN(options.secret, auth::ResolveSecret(options.secret));
  if (!options.tls.has_value()) {
    ASSIGN_OR_RETURN(options.tls, auth::TlsFilesFromEnvironment());
  }
  // Checked here, so a bad file fails construction rather than the first connect.
  RETURN_IF_ERROR(auth::TlsContext::Resolve(options.tls).status());
  return std::unique_ptr<Communicator>(
      new Communicator(std::move(options), host_port.first, host_port.second));
}

Communicator::Communicator(CommunicatorOptions options, std::string master_host, int master_port)
    : options_(std::move(options)),
      operation_timeout_(*options_.operation_timeout),
      accept_timeout_(*options_.accept_timeout),
      master_host_(std::move(master_host)),
      master_port_(master_port),
      runner_(std::make_unique<OpRunner>()),
      backups_(std::make_unique<BackupPool>()),
      mesh_(mu_, options_.transport, options_.peer_group, MeshSetup(options_, operation_timeout_),
            [this](int64_t epoch) {
              mu_.AssertHeld();  // EpochMesh calls it with its owner's mutex, mu_, held.
              return MeshMembers(epoch);
            }) {}

absl::StatusOr<EpochMesh::Members> Communicator::MeshMembers(int64_t epoch) const {
  if (!lost_.ok()) return lost_;
  if (!link_ || !topology_.announced()) {
    return absl::UnavailableError("not connected to the master (reconnecting)");
  }
  if (topology_.epoch() != epoch) {
    return absl::UnavailableError(absl::StrCat("epoch ", epoch, " of peer group ",
                                               topology_.latest().group, " is over (now ",
                                               topology_.epoch(), ")"));
  }
  return EpochMesh::Members{topology_.latest().ring, link_->peer_id(), store_, data_address_};
}

Communicator::~Communicator() {
  std::shared_ptr<MasterLink> link;
  {
    UniqueLock lock(mu_);
    // Let in-flight operations finish (each is bounded by its own deadline).
    changed_.wait_for(lock, std::chrono::seconds(30),
                      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_.empty(); });
    link = link_;
  }
  if (link) link->Leave();
  runner_.reset();  // Joins the operation threads.
  std::shared_ptr<Transport> mesh;
  {
    MutexLock lock(mu_);
    mesh_.OwnerHeld();
    mesh = mesh_.Release();
    link_.reset();
  }
  mesh.reset();
}

int64_t Communicator::peer_id() const {
  MutexLock lock(mu_);
  return link_ ? link_->peer_id() : 0;
}

std::shared_ptr<MasterLink> Communicator::link() const {
  MutexLock lock(mu_);
  return link_;
}

absl::Status Communicator::Usable() const {
  MutexLock lock(mu_);
  if (!link_) {
    return WithResult(absl::FailedPreconditionError("not connected: call connect() first"),
                      Result::kNotInitialized);
  }
  if (!lost_.ok()) return lost_;
  if (!topology_.announced()) {
    return WithResult(absl::FailedPreconditionError("not accepted by the peers yet"),
                      Result::kNotInitialized);
  }
  return absl::OkStatus();
}

void Communicator::AdoptTopology() {
  MutexLock lock(mu_);
  topology_.Adopt();
}

absl::StatusOr<std::string> Communicator::DataAddress() const {
  if (!options_.address.empty()) return options_.address;
  if (net::IsLoopbackAddress(master_host_) || master_host_ == "localhost") return "127.0.0.1";
  auto route = net::RouteTo(master_host_);
  if (!route.ok()) return WithResult(route.status(), Result::kMasterConnectionFailed);
  return route->local_address;
}

uint64_t Communicator::StartFresh() {
  uint64_t generation;
  std::shared_ptr<Transport> old_mesh;
  {
    // Forget the old connection's view before the new link can report. Epoch numbers may
    // repeat (a restarted master), so the old connections go too.
    MutexLock build(mesh_.build_mu());
    MutexLock lock(mu_);
    mesh_.OwnerHeld();
    generation = ++generation_;
    link_.reset();
    lost_ = absl::OkStatus();
    topology_.Clear();
    in_flight_.ForgetInstances();
    old_mesh = mesh_.Release();
  }
  if (old_mesh) old_mesh->Abort(absl::UnavailableError("reconnected to the master"));
  old_mesh.reset();
  // The arena's turns count per epoch too: a restarted master's epoch 2 is not the old one's.
  arena_order_.Reset();
  return generation;
}

absl::Status Communicator::CheckCanConnect() const {
  MutexLock lock(mu_);
  if (link_ && lost_.ok()) {
    return WithResult(absl::FailedPreconditionError("already connected"), Result::kInvalidUsage);
  }
  if (!in_flight_.empty()) {
    return WithResult(
        absl::FailedPreconditionError("operations of the old connection are still in flight"),
        Result::kPendingAsyncOps);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<MasterLink>> Communicator::LinkToMaster(uint64_t generation,
                                                                       absl::Time deadline) {
  // The old link's reader may still report its loss late: only this link's reports count.
  MasterLink::Callbacks callbacks;
  callbacks.on_topology = [this, generation](const Topology& t) { OnTopology(generation, t); };
  callbacks.on_outcome = [this, generation](const OpKey& k, const absl::Status& s) {
    OnOutcome(generation, k, s);
  };
  callbacks.on_turn = [this, generation](const OpKey& k, int64_t turn) {
    OnTurn(generation, k, turn);
  };
  callbacks.on_lost = [this, generation](const absl::Status& s) { OnLost(generation, s); };
  ASSIGN_OR_RETURN(std::shared_ptr<const auth::TlsContext> tls,
                   auth::TlsContext::Resolve(options_.tls));
  ASSIGN_OR_RETURN(std::unique_ptr<MasterLink> made,
                   MasterLink::Connect(master_host_, master_port_, options_.peer_group,
                                       std::min(deadline, absl::Now() + kReachMasterTimeout),
                                       std::move(callbacks), *options_.secret, tls));
  return std::shared_ptr<MasterLink>(std::move(made));
}

absl::StatusOr<std::unique_ptr<TCPStore>> Communicator::ConnectStore(int port,
                                                                     absl::Time deadline) const {
  TCPStoreOptions store_options;
  store_options.host = master_host_;
  store_options.port = port;
  store_options.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  store_options.secret = options_.secret;
  store_options.tls = options_.tls;
  auto store = TCPStore::Create(store_options);
  if (!store.ok()) {
    return WithResult(absl::UnavailableError(absl::StrCat(
                          "cannot reach the elastic master's store at ",
                          HostPort(master_host_, port), ": ", store.status().message())),
                      Result::kMasterConnectionFailed);
  }
  return store;
}

absl::Status Communicator::Connect(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + std::min(timeout, accept_timeout_);
  RETURN_IF_ERROR(CheckCanConnect());
  ASSIGN_OR_RETURN(const std::string address, DataAddress());
  const uint64_t generation = StartFresh();
  ASSIGN_OR_RETURN(std::shared_ptr<MasterLink> link, LinkToMaster(generation, deadline));
  ASSIGN_OR_RETURN(std::unique_ptr<TCPStore> store, ConnectStore(link->store_port(), deadline));
  int64_t epoch;
  {
    UniqueLock lock(mu_);
    link_ = link;
    store_ = std::shared_ptr<Store>(std::move(store));
    data_address_ = address;
    const int64_t me = link->peer_id();
    auto accepted = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !lost_.ok() || topology_.Includes(me);
    };
    while (!accepted() && absl::Now() < deadline) {
      changed_.wait_until(lock, SteadyDeadline(std::min(deadline - absl::Now(), absl::Seconds(1))));
    }
    if (!lost_.ok()) return lost_;
    if (!accepted()) {
      link_.reset();
      lost_ =
          WithResult(absl::DeadlineExceededError("not accepted in time"), Result::kNotInitialized);
      return WithResult(
          absl::DeadlineExceededError(absl::StrCat(
              "registered with the master at ", options_.master_address, " as peer ", me,
              " but the accepted peers did not take this peer in "
              "(they must call update_topology) within the connect timeout")),
          Result::kMasterConnectionFailed);
    }
    epoch = topology_.epoch();
    topology_.Adopt();
  }
  // The peers that accepted this one build the new epoch's connections now: so does this one.
  auto mesh = mesh_.Get(epoch);
  if (!mesh.ok() && !IsRetryableFailure(mesh.status())) return mesh.status();
  return absl::OkStatus();
}

absl::Status Communicator::UpdateTopology() {
  RETURN_IF_ERROR(Usable());
  RETURN_IF_ERROR(NoOpsInFlight("update_topology"));
  const absl::Time deadline = absl::Now() + operation_timeout_;
  auto updated = link()->Call(MessageType::kUpdateTopology, {MillisecondsLeft(deadline)}, "",
                              deadline + kMasterAnswerGrace);
  absl::Status status = updated.status();
  if (status.ok() && !updated->empty() && (*updated)[0] != 0) {
    // Peers were accepted: everyone builds the new epoch's connections now.
    auto mesh = mesh_.Get(CurrentEpoch());
    if (!mesh.ok() && !IsRetryableFailure(mesh.status())) status = mesh.status();
  }
  AdoptTopology();  // The caller now sees the epoch it is in, whatever happened.
  if (status.ok()) return status;
  return WithResult(
      absl::Status(status.code(), absl::StrCat("update_topology: ", status.message())),
      Result::kUpdateTopologyFailed);
}

absl::StatusOr<bool> Communicator::ArePeersPending() {
  RETURN_IF_ERROR(Usable());
  AdoptTopology();
  ASSIGN_OR_RETURN(int64_t pending, link()->Request(MessageType::kArePeersPending,
                                                    absl::Now() + operation_timeout_));
  return pending != 0;
}

absl::StatusOr<int64_t> Communicator::GetAttribute(Attribute attribute) const {
  MutexLock lock(mu_);
  return topology_.Attribute(attribute);  // The caller's epoch, not the latest announcement.
}

absl::StatusOr<int64_t> Communicator::AnnouncedAttribute(Attribute attribute) const {
  MutexLock lock(mu_);
  return topology_.AnnouncedAttribute(attribute);
}

void Communicator::OnTopology(uint64_t generation, const Topology& topology) {
  std::shared_ptr<Transport> stale;
  {
    MutexLock lock(mu_);
    if (generation != generation_) return;
    mesh_.OwnerHeld();
    stale = mesh_.StaleAt(topology.epoch);
    topology_.Announce(topology);
  }
  changed_.notify_all();
  // Operations of the old epoch cannot finish: end their data phase now (the master fails them).
  if (stale) {
    stale->Abort(absl::UnavailableError(
        absl::StrCat("peer group ", topology.group, " moved to epoch ", topology.epoch)));
  }
}

void Communicator::OnLost(uint64_t generation, const absl::Status& status) {
  std::shared_ptr<Transport> mesh;
  {
    MutexLock lock(mu_);
    if (generation != generation_) return;
    lost_ = status;
    mesh_.OwnerHeld();
    mesh = mesh_.current();
    in_flight_.ForEach([&](Op& op) {
      if (!op.decided) {
        op.decided = true;
        op.outcome = status;
      }
    });
  }
  changed_.notify_all();
  if (mesh) mesh->Abort(status);
}

}  // namespace plexus::elastic
