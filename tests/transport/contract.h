// The Transport contract suite: one set of tests of base/transport/transport.h's promises, run
// against every implementation (tcp over sockets, tcp over shared-memory rings, Gloo, MPI, a
// subgroup of a parent transport), as tests/conformance runs one suite against every backend.
// Each implementation is one small file that defines UnderTest(); BUILD links it with
// contract_test.cc into a test of its own.
#ifndef PLEXUS_TESTS_TRANSPORT_CONTRACT_H_
#define PLEXUS_TESTS_TRANSPORT_CONTRACT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/store/store.h"
#include "base/transport/transport.h"

namespace plexus::testing {

// One rank's part of a group under test. `transport` is null on a rank that takes no part
// (a parent rank outside the subgroup); `keep` holds whatever the transport lives on.
struct Member {
  std::shared_ptr<Transport> transport;
  std::shared_ptr<void> keep;
};

struct TransportUnderTest {
  std::string name;
  // Ranks that form the group but take no part in it (the subgroup's outsiders).
  int idle_ranks = 0;
  // Ranks are processes started by mpirun, one per process, instead of threads.
  bool launched_by_mpirun = false;
  // RecvFromAny is implemented (the subgroup leaves it out; its algorithms never use it).
  bool receives_from_any = true;
  // A peer that goes away is found; under mpirun the launcher ends the whole job instead.
  bool finds_lost_peers = true;
  // Why a receive whose size or signature differs from its message's is not refused with
  // FailedPrecondition as the contract says (empty: it is). The test skips, printing it.
  std::string unchecked_mismatches;
  // Why AbortOperation does not reach the peers (empty: it does).
  std::string local_aborts;
  // Why AbortOperation ends other operations too (empty: it spares them).
  std::string abort_operation_breaks_all;
  // Forms the group: `rank` of `world` ranks (world = tested size + idle_ranks), meeting
  // through `store`.
  std::function<absl::StatusOr<Member>(std::shared_ptr<Store> store, int rank, int world)> make;
};

const TransportUnderTest& UnderTest();

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TRANSPORT_CONTRACT_H_
