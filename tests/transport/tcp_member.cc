#include "tests/transport/tcp_member.h"

#include <utility>

#include "base/core/status_macros.h"

namespace plexus::testing {

absl::StatusOr<std::shared_ptr<TcpTransport>> MakeTcpTransport(std::shared_ptr<Store> store,
                                                               int rank, int size,
                                                               tcp::ShmMode shared_memory) {
  TcpTransportOptions options;
  options.store = std::move(store);
  options.rank = rank;
  options.size = size;
  options.group_name = "contract";
  options.address = "127.0.0.1";
  options.connect_timeout = absl::Seconds(60);
  options.secret = "";
  options.tls = auth::TlsFiles{};
  options.shared_memory_config = tcp::ShmConfig{shared_memory};
  ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> transport, TcpTransport::Create(options));
  return std::shared_ptr<TcpTransport>(std::move(transport));
}

}  // namespace plexus::testing
