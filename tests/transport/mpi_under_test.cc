// MPI point-to-point under the contract: the test runs itself under mpirun, one rank a process.
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/mpi/mpi_engine.h"
#include "backends/mpi/mpi_transport.h"
#include "base/core/status_macros.h"
#include "tests/transport/contract.h"

namespace plexus::testing {

using mpi::MpiEngine;
using mpi::MpiGroup;
using mpi::MpiTransport;

const TransportUnderTest& UnderTest() {
  static const TransportUnderTest* const under = new TransportUnderTest{
      .name = "mpi",
      .launched_by_mpirun = true,
      .finds_lost_peers = false,
      .unchecked_mismatches =
          "mpi: a message larger than its receive fails as MPI_ERR_TRUNCATE "
          "without the message's size, and no signature travels with a "
          "message",
      .local_aborts =
          "mpi: AbortOperation fails this rank's requests only; peers wait out "
          "their deadline",
      .make = [](std::shared_ptr<Store> store, int rank, int world) -> absl::StatusOr<Member> {
        static std::atomic<int> groups{0};
        const std::string name = absl::StrCat("contract-", groups++);
        ASSIGN_OR_RETURN(MpiEngine * engine, MpiEngine::Get());
        // Every member must be calling MPI_Comm_create_group together.
        RETURN_IF_ERROR(store->Set(absl::StrCat(name, "/ready/", rank), "1"));
        std::vector<std::string> keys;
        std::vector<int> ranks;
        for (int r = 0; r < world; ++r) {
          keys.push_back(absl::StrCat(name, "/ready/", r));
          ranks.push_back(r);
        }
        RETURN_IF_ERROR(store->Wait(keys));
        ASSIGN_OR_RETURN(std::shared_ptr<MpiGroup> group,
                         MpiGroup::Create(engine, name, ranks, rank, absl::Seconds(60)));
        return Member{std::make_shared<MpiTransport>(group), group};
      }};
  return *under;
}

}  // namespace plexus::testing
