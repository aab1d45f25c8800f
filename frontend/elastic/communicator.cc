#include "frontend/elastic/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/collective_context.h"
#include "algorithms/keep_originals.h"
#include "base/auth/mutual_auth.h"
#include "base/core/deadline.h"
#include "base/core/environment.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/route.h"
#include "base/store/tcp_store.h"
#include "base/transport/transport.h"
#include "base/transport/transport_registry.h"
#include "frontend/elastic/backup_pool.h"
#include "frontend/elastic/master_link.h"
#include "frontend/elastic/master_node.h"

namespace plexus::elastic {

using algorithms::AlgorithmTable;
using algorithms::AllReduceInPlace;
using algorithms::ArenaSlots;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::CopyAside;
using algorithms::DescribeSignature;
using algorithms::KeepRemainingOriginals;
using algorithms::MakeSignature;
using algorithms::QuantizedRingAllReduce;
using algorithms::SaveThenOverwrite;
using algorithms::ScratchArena;

namespace {

// The transport operation id of (tag, instance): below 2^39, unique for 2^19 uses of a tag per
// epoch (each epoch has a fresh transport).
uint64_t OperationId(const OpKey& key) {
  return ((static_cast<uint64_t>(key.instance) & ((1u << 19) - 1)) << 20) |
         static_cast<uint64_t>(key.tag);
}

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

// An unset timeout: PLEXUS_ELASTIC_TIMEOUT (seconds), else 10 minutes.
absl::StatusOr<absl::Duration> ResolveTimeout(std::optional<absl::Duration> set, const char* what) {
  absl::Duration timeout = absl::Minutes(10);
  if (set.has_value()) {
    timeout = *set;
  } else if (const char* env = ReadEnvironment("PLEXUS_ELASTIC_TIMEOUT"); env != nullptr && *env) {
    double seconds = 0;
    if (!absl::SimpleAtod(env, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("PLEXUS_ELASTIC_TIMEOUT=\"", env, "\" is not a positive number of seconds"));
    }
    timeout = absl::Seconds(seconds);
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic communicator ", what, " must be positive, not ", absl::FormatDuration(timeout)));
  }
  return timeout;
}

}  // namespace

// Runs each operation on its own thread (the algorithms block), reusing idle threads; never
// queues one operation behind another, since peers may start them in different orders.
class OpRunner {
 public:
  ~OpRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (idle_ < static_cast<int>(tasks_.size())) {
      threads_.emplace_back([this] { Work(); });
    } else {
      ready_.notify_one();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      ++idle_;
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

struct Communicator::Op {
  OpKey key;
  ReduceDescriptor descriptor;
  void* recv = nullptr;
  size_t bytes = 0;
  // recv's contents before the call, for a failure to put back: in the op's own backup, or in
  // the caller's buffer (all_reduce_multiple_with_retry's, kept across attempts). Filled as the
  // data phase overwrites recv (keep_originals.h): the first originals_kept bytes are there,
  // recv still holds the rest.
  BackupPool::Buffer backup;
  uint8_t* originals = nullptr;
  size_t originals_kept = 0;
  bool caller_originals = false;  // Then completed when the op ends, for the next attempt.
  WorkPtr work;
  // Set by the master's outcome (guarded by the communicator's mu_).
  bool decided = false;
  absl::Status outcome;
  std::shared_ptr<Transport> mesh;     // While the data phase runs; aborted by early outcomes.
  int64_t turn = -1;                   // Its shared-memory turn (kOpTurn), once the master gave it.
  std::function<void()> on_data_done;  // Called when this peer's data movement ended.
};

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
            [this](int64_t epoch) { return MeshMembers(epoch); }) {}

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
    std::unique_lock<std::mutex> lock(mu_);
    // Let in-flight operations finish (each is bounded by its own deadline).
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return in_flight_.empty(); });
    link = link_;
  }
  if (link) link->Leave();
  runner_.reset();  // Joins the operation threads.
  std::shared_ptr<Transport> mesh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mesh = mesh_.Release();
    link_.reset();
  }
  mesh.reset();
}

int64_t Communicator::peer_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_ ? link_->peer_id() : 0;
}

std::shared_ptr<MasterLink> Communicator::link() const {
  std::lock_guard<std::mutex> lock(mu_);
  return link_;
}

absl::Status Communicator::Usable() const {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  topology_.Adopt();
}

absl::Status Communicator::Connect(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + std::min(timeout, accept_timeout_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (link_ && lost_.ok()) {
      return WithResult(absl::FailedPreconditionError("already connected"), Result::kInvalidUsage);
    }
    if (!in_flight_.empty()) {
      return WithResult(absl::FailedPreconditionError("operations of the old connection are "
                                                      "still in flight"),
                        Result::kPendingAsyncOps);
    }
  }
  std::string address = options_.address;
  if (address.empty()) {
    if (net::IsLoopbackAddress(master_host_) || master_host_ == "localhost") {
      address = "127.0.0.1";
    } else {
      auto route = net::RouteTo(master_host_);
      if (!route.ok()) {
        return WithResult(route.status(), Result::kMasterConnectionFailed);
      }
      address = route->local_address;
    }
  }
  uint64_t generation;
  std::shared_ptr<Transport> old_mesh;
  {
    // A fresh start: forget the old connection's view before the new link can report. Epoch
    // numbers may repeat (a restarted master), so the old connections go too.
    const std::unique_lock<std::mutex> build = mesh_.LockBuilds();
    std::lock_guard<std::mutex> lock(mu_);
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
  std::shared_ptr<MasterLink> link = std::move(made);
  TCPStoreOptions store_options;
  store_options.host = master_host_;
  store_options.port = link->store_port();
  store_options.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  store_options.secret = options_.secret;
  store_options.tls = options_.tls;
  auto store = TCPStore::Create(store_options);
  if (!store.ok()) {
    return WithResult(
        absl::UnavailableError(absl::StrCat("cannot reach the elastic master's store at ",
                                            HostPort(master_host_, link->store_port()), ": ",
                                            store.status().message())),
        Result::kMasterConnectionFailed);
  }
  int64_t epoch;
  {
    std::unique_lock<std::mutex> lock(mu_);
    link_ = link;
    store_ = std::shared_ptr<Store>(std::move(store).value());
    data_address_ = address;
    const int64_t me = link->peer_id();
    auto accepted = [&] { return !lost_.ok() || topology_.Includes(me); };
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
  std::lock_guard<std::mutex> lock(mu_);
  return topology_.Attribute(attribute);  // The caller's epoch, not the latest announcement.
}

absl::StatusOr<int64_t> Communicator::AnnouncedAttribute(Attribute attribute) const {
  std::lock_guard<std::mutex> lock(mu_);
  return topology_.AnnouncedAttribute(attribute);
}

void Communicator::OnTopology(uint64_t generation, const Topology& topology) {
  std::shared_ptr<Transport> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
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

void Communicator::OnOutcome(uint64_t generation, const OpKey& key, const absl::Status& outcome) {
  std::shared_ptr<Transport> mesh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
    const std::shared_ptr<Op> found = in_flight_.Find(key);
    if (!found) return;
    Op& op = *found;
    op.decided = true;
    op.outcome = outcome;
    if (!outcome.ok()) mesh = op.mesh;
  }
  changed_.notify_all();
  if (mesh) mesh->AbortOperation(OperationId(key), outcome);  // Decided early: stop moving data.
}

void Communicator::OnLost(uint64_t generation, const absl::Status& status) {
  std::shared_ptr<Transport> mesh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
    lost_ = status;
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

namespace {

const AlgorithmTable& ElasticAlgorithmTable() {
  static const AlgorithmTable table = [] {
    auto from_env = AlgorithmTable::FromEnvironment();
    return from_env.ok() ? *from_env : AlgorithmTable::Default();
  }();
  return table;
}

// Below this an operation runs over the rings: waiting for the master's turn would cost more
// than the arena saves.
constexpr size_t kArenaTurnMinBytes = 256 << 10;

}  // namespace

bool Communicator::TakesArenaTurns(Transport& mesh, const Op& op) {
  if (mesh.shared_arena() == nullptr || op.bytes < kArenaTurnMinBytes ||
      op.descriptor.quantization.algorithm != QuantizationAlgorithm::kNone) {
    return false;
  }
  return ElasticAlgorithmTable().Select("all_reduce_same_host", op.bytes).needs_arena;
}

absl::Status Communicator::MoveData(const std::shared_ptr<Op>& op, Transport& mesh,
                                    absl::Time deadline, const int64_t* turn) {
  // In turn, the operation is the arena's alone: numbered by its turn, as every member does.
  const uint64_t sequence = turn ? static_cast<uint64_t>(*turn) + 1 : OperationId(op->key);
  const uint64_t instance = turn ? sequence : static_cast<uint64_t>(op->key.instance);
  // Each runner thread runs one operation at a time: its scratch is reused, not refaulted.
  thread_local ScratchArena scratch;
  CollectiveContext ctx(mesh, CollectiveKind::kAllReduce, sequence,
                        MakeSignature(CollectiveKind::kAllReduce, op->descriptor.dtype, instance,
                                      op->descriptor.count),
                        std::max(deadline - absl::Now(), absl::ZeroDuration()), op->work.get(),
                        &scratch);
  if (turn) {
    SharedArena* arena = mesh.shared_arena();
    arena->Announce(ctx.signature());  // Peers waiting there can tell which one this runs.
    ctx.UseSharedArena(arena);
    absl::Status decided;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (op->decided) decided = op->outcome.ok() ? absl::AbortedError("decided") : op->outcome;
    }
    // Failed while it waited for its turn: members already in the arena for it stop too.
    if (!decided.ok()) return ArenaSlots(ctx, *arena).Fail(decided);
  }
  // The algorithms wait on their own sends: the transport leaves a send the kernel could not
  // take at once to this thread's wait instead of waking a thread of its own for it.
  const ScopedSendsAwaited awaited;
  // recv's input is kept as the schedule overwrites it, for a failure to put back.
  ctx.KeepOriginals(op->originals, op->originals_kept);
  const QuantizationOptions& quantization = op->descriptor.quantization;
  absl::Status status;
  if (quantization.algorithm == QuantizationAlgorithm::kNone) {
    status = AllReduceInPlace(ctx, ElasticAlgorithmTable(), op->recv, op->descriptor.count,
                              op->descriptor.dtype, ReduceOp(op->descriptor.op));
  } else {
    KeepRemainingOriginals(ctx, op->recv, op->bytes);
    status = QuantizedRingAllReduce(ctx, op->recv, op->descriptor.count, op->descriptor.dtype,
                                    ReduceOp(op->descriptor.op),
                                    {quantization.algorithm, quantization.quantized_dtype});
  }
  op->originals_kept = ctx.originals_kept();
  return status;
}

absl::Status Communicator::MoveDataInTurn(const std::shared_ptr<Op>& op, Transport& mesh,
                                          absl::Time deadline) {
  int64_t turn;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (op->turn < 0 && !op->decided && absl::Now() < deadline) {
      changed_.wait_until(lock, SteadyDeadline(std::min(deadline - absl::Now(), absl::Seconds(1))));
    }
    if (op->turn < 0) {
      if (op->decided) return absl::AbortedError("decided before the data moved");
      return absl::DeadlineExceededError(
          "the master gave no shared-memory turn in time: not every member started it");
    }
    turn = op->turn;
  }
  const int64_t epoch = op->key.epoch;
  auto abandoned = [this, epoch] {
    std::lock_guard<std::mutex> lock(mu_);
    return !lost_.ok() || topology_.epoch() != epoch;
  };
  // Runs on whichever thread holds the arena when this turn comes (see ArenaOrder).
  std::function<absl::Status()> body = [&] {
    if (ArenaSlots::Usable(*mesh.shared_arena(), static_cast<uint64_t>(turn) + 1)) {
      return MoveData(op, mesh, deadline, &turn);
    }
    return MoveData(op, mesh, deadline, nullptr);  // The arena failed earlier this epoch.
  };
  return arena_order_.Run(epoch, turn, deadline, abandoned, body);
}

void Communicator::OnTurn(uint64_t generation, const OpKey& key, int64_t turn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_) return;
    const std::shared_ptr<Op> op = in_flight_.Find(key);
    if (!op) return;
    op->turn = turn;
  }
  changed_.notify_all();
}

WorkPtr Communicator::AllReduceAsync(const void* send, void* recv,
                                     const ReduceDescriptor& descriptor) {
  return Launch(send, recv, descriptor, nullptr, false, -1, nullptr);
}

absl::StatusOr<ReduceInfo> Communicator::AllReduce(const void* send, void* recv,
                                                   const ReduceDescriptor& descriptor) {
  WorkPtr work = AllReduceAsync(send, recv, descriptor);
  RETURN_IF_ERROR(work->Wait(operation_timeout_ + absl::Seconds(30)));
  const Work::Stats stats = work->stats();
  return ReduceInfo{stats.world_size, stats.bytes_sent, stats.bytes_received};
}

WorkPtr Communicator::Launch(const void* send, void* recv, const ReduceDescriptor& descriptor,
                             uint8_t* originals, bool originals_full, int64_t required_epoch,
                             std::function<void()> on_data_done) {
  auto refuse = [&](absl::Status status) {
    return Work::Finished(std::move(status), "elastic all_reduce");
  };
  if (absl::Status status = ValidateReduce(descriptor); !status.ok()) return refuse(status);
  const size_t bytes = static_cast<size_t>(descriptor.count) * DTypeSize(descriptor.dtype);
  if (bytes > 0 && (send == nullptr || recv == nullptr)) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("all_reduce ", DescribeReduce(descriptor), ": null send or receive buffer")));
  }
  const auto* s = static_cast<const uint8_t*>(send);
  const auto* r = static_cast<const uint8_t*>(recv);
  if (s != r && s < r + bytes && r < s + bytes) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("all_reduce ", DescribeReduce(descriptor),
                     ": send and receive buffers overlap without being the same buffer")));
  }
  if (absl::Status status = Usable(); !status.ok()) return refuse(status);
  auto op = std::make_shared<Op>();
  op->descriptor = descriptor;
  op->recv = recv;
  op->bytes = bytes;
  op->on_data_done = std::move(on_data_done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_.Contains(descriptor.tag)) {
      return refuse(WithResult(
          absl::InvalidArgumentError(absl::StrCat("all_reduce ", DescribeReduce(descriptor),
                                                  ": an all-reduce with tag ", descriptor.tag,
                                                  " is already in flight")),
          Result::kInvalidUsage));
    }
    if (required_epoch >= 0 && required_epoch != topology_.epoch()) {
      return refuse(WithResult(
          absl::UnavailableError(absl::StrCat("all_reduce ", DescribeReduce(descriptor), ": epoch ",
                                              required_epoch, " of the peer group is over (now ",
                                              topology_.epoch(), ")")),
          Result::kRankConnectionLost));
    }
    topology_.Adopt();  // Launching is the caller's call: its view moves to this epoch.
    op->key.group = topology_.latest().group;
    op->key.epoch = topology_.epoch();
    op->key.tag = static_cast<int64_t>(descriptor.tag);
    op->key.instance = in_flight_.NextInstance(descriptor.tag, topology_.epoch());
    op->work = std::make_shared<Work>(
        "elastic all_reduce", static_cast<int>(topology_.latest().ring.size()), op->key.instance);
    in_flight_.Add(descriptor.tag, op);
  }
  op->caller_originals = originals != nullptr;
  if (originals == nullptr && bytes > 0) {
    op->backup = backups_->Take(bytes);
    originals = op->backup.data.get();
  }
  op->originals = originals;
  op->originals_kept = originals_full ? bytes : 0;
  if (s != r && bytes > 0) {
    if (op->originals_kept < bytes) {
      SaveThenOverwrite(static_cast<uint8_t*>(recv), s, originals, bytes);
      op->originals_kept = bytes;
    } else {
      std::memcpy(recv, send, bytes);
    }
  }
  WorkPtr work = op->work;
  runner_->Submit([this, op] { Run(op); });
  return work;
}

void Communicator::Run(const std::shared_ptr<Op>& op) {
  const absl::Time deadline = absl::Now() + operation_timeout_;
  std::shared_ptr<MasterLink> master = link();
  absl::Status local;
  auto mesh = mesh_.Get(op->key.epoch);
  if (!mesh.ok()) local = mesh.status();
  const bool wants_turn = local.ok() && *mesh != nullptr && TakesArenaTurns(**mesh, *op);
  // A peer that cannot move data reports that in its kOpDone alone: a start it could not keep
  // would only make the peers disagree about the operation instead.
  if (master && local.ok()) {
    Message start{MessageType::kOpStart, {}, DescribeReduce(op->descriptor)};
    AppendOpKey(op->key, start.ints);
    const std::vector<int64_t> signature = OpSignatureInts(op->descriptor);
    start.ints.insert(start.ints.end(), signature.begin(), signature.end());
    start.ints.push_back(wants_turn ? 1 : 0);
    if (absl::Status sent = master->Send(start); !sent.ok()) local = sent;
  }
  if (local.ok() && *mesh != nullptr) {
    bool decided;
    {
      std::lock_guard<std::mutex> lock(mu_);
      op->mesh = *mesh;
      decided = op->decided;
    }
    if (decided) {
      local = absl::AbortedError("decided before the data moved");
    } else if (wants_turn) {
      local = MoveDataInTurn(op, **mesh, deadline);
    } else {
      local = MoveData(op, **mesh, deadline, nullptr);
    }
  }
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("elastic: peer ", master ? master->peer_id() : 0, " tag ",
                                       op->key.tag, " #", op->key.instance, " epoch ",
                                       op->key.epoch, " moved its data: ", local.ToString()));
  }
  if (op->on_data_done) op->on_data_done();
  Message done{MessageType::kOpDone, {}, std::string(local.message())};
  AppendOpKey(op->key, done.ints);
  done.ints.push_back(static_cast<int64_t>(local.code()));
  if (master) (void)master->Send(done);
  absl::Status outcome;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const absl::Time decide_by = deadline + absl::Seconds(10);
    while (!op->decided && absl::Now() < decide_by) {
      changed_.wait_until(lock,
                          SteadyDeadline(std::min(decide_by - absl::Now(), absl::Seconds(1))));
    }
    if (!op->decided) {
      op->decided = true;
      op->outcome = absl::DeadlineExceededError("the master did not decide in time");
    }
    outcome = op->outcome;
    op->mesh.reset();
  }
  if (!outcome.ok()) {
    if (IsRetryableFailure(outcome)) AdoptTopology();  // The peers changed: the caller sees it.
    // The kept prefix was overwritten; recv still holds the rest.
    if (op->originals_kept > 0) std::memcpy(op->recv, op->originals, op->originals_kept);
    if (!local.ok() && local.code() != outcome.code()) {
      outcome = WithResult(
          absl::Status(outcome.code(),
                       absl::StrCat(outcome.message(), " (here: ", local.message(), ")")),
          ResultOf(outcome));
    }
    outcome =
        WithResult(absl::Status(outcome.code(),
                                absl::StrCat("all_reduce ", DescribeReduce(op->descriptor),
                                             " in epoch ", op->key.epoch, ": ", outcome.message())),
                   ResultOf(outcome));
  }
  if (op->caller_originals && op->originals_kept < op->bytes) {
    // A later attempt re-runs from the originals: recv's untouched rest completes them.
    CopyAside(op->originals + op->originals_kept,
              static_cast<const uint8_t*>(op->recv) + op->originals_kept,
              op->bytes - op->originals_kept);
  }
  backups_->Give(std::move(op->backup));
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.Remove(op->descriptor.tag, op);
  }
  changed_.notify_all();
  op->work->Complete(outcome);
}

}  // namespace plexus::elastic
