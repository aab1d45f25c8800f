// SubgroupTransport under the contract: ranks 3, 0 and 2 of a 4-rank tcp group, in that order,
// as a group of their own (parent rank 1 takes no part), so member and parent numbers differ.
#include <vector>

#include "algorithms/subgroup_transport.h"
#include "base/core/status_macros.h"
#include "tests/testing/loopback_tcp.h"
#include "tests/transport/contract.h"

namespace plexus::testing {

using algorithms::SubgroupTransport;
using tcp::TcpTransport;

const TransportUnderTest& UnderTest() {
  static const TransportUnderTest* const under = new TransportUnderTest{
      .name = "a subgroup of a tcp group",
      .idle_ranks = 1,
      .receives_from_any = false,
      .make = [](std::shared_ptr<Store> store, int rank, int world) -> absl::StatusOr<Member> {
        ASSIGN_OR_RETURN(
            std::shared_ptr<TcpTransport> parent,
            LoopbackTcpTransport(std::move(store), rank, world, "contract", tcp::ShmMode::kOff));
        const std::vector<int> members = {3, 0, 2};
        if (rank == 1) return Member{nullptr, parent};
        return Member{std::make_shared<SubgroupTransport>(*parent, members, /*phase=*/3), parent};
      }};
  return *under;
}

}  // namespace plexus::testing
