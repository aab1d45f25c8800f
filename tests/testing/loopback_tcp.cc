#include "tests/testing/loopback_tcp.h"

#include <utility>

namespace plexus::testing {

using tcp::TcpTransport;
using tcp::TcpTransportOptions;

absl::StatusOr<std::unique_ptr<TcpTransport>> LoopbackTcpTransport(std::shared_ptr<Store> store,
                                                                   int rank, int size,
                                                                   const std::string& group,
                                                                   tcp::ShmMode shared_memory,
                                                                   absl::Duration connect_timeout) {
  TcpTransportOptions options;
  options.store = std::move(store);
  options.rank = rank;
  options.size = size;
  options.group_name = group;
  options.address = "127.0.0.1";
  options.connect_timeout = connect_timeout;
  options.secret = "";
  options.tls = auth::TlsFiles{};
  options.shared_memory_config = tcp::ShmConfig{shared_memory};
  return TcpTransport::Create(options);
}

}  // namespace plexus::testing
