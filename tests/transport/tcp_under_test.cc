// The tcp transport under the contract: over sockets, or (PLEXUS_CONTRACT_RINGS) with every
// pair of ranks on shared-memory rings, as ranks on one host are by default.
#include "base/core/status_macros.h"
#include "tests/testing/loopback_tcp.h"
#include "tests/transport/contract.h"

namespace plexus::testing {

using tcp::TcpTransport;

const TransportUnderTest& UnderTest() {
#ifdef PLEXUS_CONTRACT_RINGS
  constexpr tcp::ShmMode kMode = tcp::ShmMode::kRequired;
  constexpr char kName[] = "tcp over shared-memory rings";
#else
  constexpr tcp::ShmMode kMode = tcp::ShmMode::kOff;
  constexpr char kName[] = "tcp over sockets";
#endif
  static const TransportUnderTest* const under = new TransportUnderTest{
      .name = kName,
      .make = [](std::shared_ptr<Store> store, int rank, int world) -> absl::StatusOr<Member> {
        ASSIGN_OR_RETURN(std::shared_ptr<TcpTransport> transport,
                         LoopbackTcpTransport(std::move(store), rank, world, "contract", kMode));
        return Member{transport, nullptr};
      }};
  return *under;
}

}  // namespace plexus::testing
