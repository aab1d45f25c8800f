// TcpBackend: the in-house backend, registered as "tcp" (cpu tensors). A
// TcpTransport per group and the shared algorithms (executor/collectives.h)
// on top.
#ifndef PLEXUS_BACKENDS_TCP_TCP_BACKEND_H_
#define PLEXUS_BACKENDS_TCP_TCP_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/common/collectives_backend.h"
#include "backends/interface/backend.h"
#include "backends/tcp/tcp_transport.h"
#include "executor/collectives.h"

namespace plexus::tcp {

inline constexpr char kTcpBackendName[] = "tcp";

class TcpBackend : public CollectivesBackend {
 public:
  // Connects the group's full mesh (collective over the group).
  static absl::StatusOr<std::shared_ptr<Backend>> Create(const BackendContext& context);

  std::string name() const override { return kTcpBackendName; }
  BackendCapabilities capabilities() const override;

 private:
  using CollectivesBackend::CollectivesBackend;
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_TCP_BACKEND_H_
