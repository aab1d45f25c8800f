// A rank of a tcp transport group for the contract suite, over sockets or shared-memory rings.
#ifndef PLEXUS_TESTS_TRANSPORT_TCP_MEMBER_H_
#define PLEXUS_TESTS_TRANSPORT_TCP_MEMBER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/tcp/tcp_transport.h"
#include "base/store/store.h"
#include "tests/transport/contract.h"

namespace plexus::testing {

absl::StatusOr<std::shared_ptr<TcpTransport>> MakeTcpTransport(std::shared_ptr<Store> store,
                                                               int rank, int size,
                                                               tcp::ShmMode shared_memory);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TRANSPORT_TCP_MEMBER_H_
