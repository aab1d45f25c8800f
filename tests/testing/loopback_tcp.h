// A tcp transport rank on loopback for tests: no secret, no TLS, shared memory as asked.
#ifndef PLEXUS_TESTS_TESTING_LOOPBACK_TCP_H_
#define PLEXUS_TESTS_TESTING_LOOPBACK_TCP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/tcp/tcp_transport.h"
#include "base/store/store.h"

namespace plexus::testing {

// Rank `rank` of a `size`-rank tcp group named `group`, meeting through `store`.
absl::StatusOr<std::unique_ptr<tcp::TcpTransport>> LoopbackTcpTransport(
    std::shared_ptr<Store> store, int rank, int size, const std::string& group,
    tcp::ShmMode shared_memory = tcp::ShmMode::kOff,
    absl::Duration connect_timeout = absl::Seconds(60));

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_LOOPBACK_TCP_H_
