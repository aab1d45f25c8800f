#include "backends/mpi/mpi_rendezvous.h"

#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backends/mpi/mpi_engine.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/interfaces.h"
#include "base/store/tcp_store.h"

namespace plexus::mpi {
namespace {

constexpr size_t kAddressBytes = 1024;
// How long a client gives each offered address before trying the next.
constexpr absl::Duration kPerCandidate = absl::Seconds(1);

// Runs one MPI call through the engine and waits for it until `deadline`.
absl::Status RunOnEngine(MpiEngine* engine, std::string what, std::function<int(MPI_Request*)> post,
                         absl::Time deadline) {
  auto work = std::make_shared<Work>("mpi", engine->world_size());
  MpiEngine::Operation op;
  op.what = std::move(what);
  op.post = std::move(post);
  op.deadline = deadline;
  op.work = work;
  engine->Start(std::move(op));
  return work->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()) + absl::Seconds(1));
}

// Rank 0: a store server on every interface (its own client uses loopback).
absl::StatusOr<std::unique_ptr<TCPStore>> ServeStore(int world_size, absl::Duration timeout,
                                                     const std::string& fixed_address) {
  TCPStoreOptions options;
  options.host = fixed_address.empty() ? "127.0.0.1" : fixed_address;
  options.is_server = true;
  options.world_size = world_size;
  options.wait_for_workers = false;
  options.timeout = timeout;
  if (fixed_address.empty()) options.bind_host = "*";
  return TCPStore::Create(options);
}

// Other ranks: the first offered address that answers.
absl::StatusOr<std::pair<std::unique_ptr<TCPStore>, std::string>> JoinStore(
    const std::vector<std::string>& candidates, int port, absl::Time deadline) {
  std::string failures;
  while (true) {
    for (const std::string& host : candidates) {
      TCPStoreOptions options;
      options.host = host;
      options.port = port;
      options.timeout =
          std::min(kPerCandidate, std::max(deadline - absl::Now(), absl::ZeroDuration()));
      auto store = TCPStore::Create(options);
      if (store.ok()) return std::make_pair(std::move(store).value(), host);
      failures = absl::StrCat(host, ": ", store.status().message());
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "mpi:// rendezvous: rank 0's store answered at none of the addresses it offered (",
          absl::StrJoin(candidates, ", "), ", port ", port, "); last: ", failures,
          ". Set PLEXUS_SOCKET_IFNAME to the interface the hosts share, or "
          "PLEXUS_MPI_STORE_ADDR to rank 0's address"));
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MpiStoreCandidates(int world_size, const EnvLookup& env) {
  if (auto fixed = env("PLEXUS_MPI_STORE_ADDR"); fixed.has_value() && !fixed->empty()) {
    return std::vector<std::string>{*fixed};
  }
  std::vector<std::string> candidates;
  int local_size = 0;
  if (auto local = env("OMPI_COMM_WORLD_LOCAL_SIZE");
      local.has_value() && absl::SimpleAtoi(*local, &local_size) && local_size == world_size) {
    candidates.push_back("127.0.0.1");
  }
  ASSIGN_OR_RETURN(std::optional<net::InterfaceFilter> filter,
                   net::InterfaceFilterFromEnvironment(env));
  ASSIGN_OR_RETURN(std::vector<net::InterfaceAddress> all, net::ListInterfaceAddresses());
  for (const net::InterfaceAddress& a : net::CandidateAddresses(all, filter)) {
    candidates.push_back(a.address);
  }
  if (candidates.empty()) {
    if (filter.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(filter->description(),
                                                     " matches no interface with an address; "
                                                     "interfaces here: ",
                                                     net::DescribeInterfaces(all)));
    }
    candidates.push_back("127.0.0.1");  // Only loopback here: the ranks must all be local.
  }
  return candidates;
}

namespace {

// Rank 0 serves the store and writes its offer ("addr,addr,...|port") into `offer`.
absl::StatusOr<std::unique_ptr<TCPStore>> OfferStore(int world_size, absl::Duration timeout,
                                                     std::vector<char>& offer) {
  ASSIGN_OR_RETURN(std::vector<std::string> candidates, MpiStoreCandidates(world_size, GetEnv));
  const std::string fixed = GetEnv("PLEXUS_MPI_STORE_ADDR").value_or("");
  ASSIGN_OR_RETURN(std::unique_ptr<TCPStore> store, ServeStore(world_size, timeout, fixed));
  std::string text = absl::StrCat(absl::StrJoin(candidates, ","), "|", store->port());
  if (text.size() >= kAddressBytes) {
    text = absl::StrCat(candidates.front(), "|", store->port());  // Hosts with many addresses.
  }
  std::memcpy(offer.data(), text.data(), text.size());
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("mpi:// rendezvous: rank 0 serves the store at ", text));
  }
  return store;
}

// Rank 0's offer to every rank, over a private duplicate of MPI_COMM_WORLD (the application
// may use WORLD).
absl::Status BroadcastOffer(MpiEngine* engine, std::shared_ptr<std::vector<char>> offer,
                            absl::Time deadline) {
  auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  RETURN_IF_ERROR(RunOnEngine(
      engine, "mpi:// rendezvous: MPI_Comm_idup of MPI_COMM_WORLD",
      [comm](MPI_Request* request) { return MPI_Comm_idup(MPI_COMM_WORLD, comm.get(), request); },
      deadline));
  absl::Status sent = RunOnEngine(
      engine, "mpi:// rendezvous: broadcast of the store address",
      [comm, offer](MPI_Request* request) {
        return MPI_Ibcast(offer->data(), static_cast<int>(offer->size()), MPI_CHAR, 0, *comm,
                          request);
      },
      deadline);
  (void)engine->Call(
      [comm] {
        if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm.get());
        return absl::OkStatus();
      },
      absl::Seconds(10));
  return sent;
}

// The other ranks join the store at the first offered address that answers.
absl::StatusOr<std::pair<std::unique_ptr<TCPStore>, std::string>> AcceptOffer(
    const std::vector<char>& offer, absl::Time deadline) {
  const std::string text(offer.data());
  std::vector<std::string> parts = absl::StrSplit(text, '|');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
    return absl::InternalError(absl::StrCat("mpi:// rendezvous: bad store offer '", text, "'"));
  }
  std::vector<std::string> candidates = absl::StrSplit(parts[0], ',', absl::SkipEmpty());
  return JoinStore(candidates, port, deadline);
}

}  // namespace

absl::StatusOr<RendezvousResult> MpiRendezvous(int rank, int world_size, absl::Duration timeout) {
  ASSIGN_OR_RETURN(MpiEngine * engine, MpiEngine::Get());
  RendezvousResult result;
  result.rank = engine->world_rank();
  result.world_size = engine->world_size();
  if ((rank >= 0 && rank != result.rank) || (world_size >= 0 && world_size != result.world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_method mpi://: rank ", rank, " and world_size ", world_size,
                     " were given, but mpirun started this process as rank ", result.rank, " of ",
                     result.world_size, " (leave them unset)"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_ptr<TCPStore> store;
  auto offer = std::make_shared<std::vector<char>>(kAddressBytes, '\0');
  if (result.rank == 0) {
    ASSIGN_OR_RETURN(store, OfferStore(result.world_size, timeout, *offer));
    result.store_host = store->host();
  }
  RETURN_IF_ERROR(BroadcastOffer(engine, offer, deadline));
  if (result.rank != 0) {
    ASSIGN_OR_RETURN(auto joined, AcceptOffer(*offer, deadline));
    store = std::move(joined.first);
    store->SetTimeout(timeout);
    result.store_host = joined.second;
  }
  result.store = std::move(store);
  return result;
}

namespace {

const bool kRegisteredMpiScheme = [] {
  absl::Status status = RegisterRendezvousScheme("mpi", &MpiRendezvous);
  return status.ok();
}();

}  // namespace
}  // namespace plexus::mpi
