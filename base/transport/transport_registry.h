// TransportRegistry: named factories for Transports that connect through a Store, so code above
// the backends (the elastic communicator) can build a transport without naming a backend.
// Backends register theirs from a static TransportRegisterer ("tcp" from backends/tcp).
#ifndef PLEXUS_BASE_TRANSPORT_TRANSPORT_REGISTRY_H_
#define PLEXUS_BASE_TRANSPORT_TRANSPORT_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/auth/tls.h"
#include "base/store/store.h"
#include "base/transport/transport.h"

namespace plexus {

// What a transport needs to connect a group: every member calls the factory with the same
// store, group name and size, and its own rank. Blocks until connected or `connect_timeout`.
struct TransportSetup {
  std::shared_ptr<Store> store;
  int rank = 0;
  int size = 1;
  std::string group_name;
  std::string address;  // Local address to listen on and advertise.
  absl::Duration connect_timeout = absl::Seconds(300);
  // Names a message signature in mismatch errors; may be empty.
  std::function<std::string(uint64_t)> describe_signature;
  // Polled while connecting: returning true gives up with Aborted. May be empty.
  std::function<bool()> cancelled;
  // Shared secret the transport's connections prove (unset: from the environment).
  std::optional<std::string> secret;
  // TLS for the transport's connections (unset: from the environment).
  std::optional<auth::TlsFiles> tls;
};

using TransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(const TransportSetup& setup)>;

// Registers `factory` under `name`; AlreadyExists if taken. Thread-safe.
absl::Status RegisterTransport(const std::string& name, TransportFactory factory);

// Builds a transport with the factory registered as `name`; NotFound lists the names there are
// (a binary that links no backend has none).
absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const std::string& name,
                                                           const TransportSetup& setup);

// Declare one at namespace scope in a backend's .cc to register at load time.
class TransportRegisterer {
 public:
  TransportRegisterer(const std::string& name, TransportFactory factory);
};

}  // namespace plexus

#endif  // PLEXUS_BASE_TRANSPORT_TRANSPORT_REGISTRY_H_
