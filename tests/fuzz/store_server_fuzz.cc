// Fuzzes a running TCPStoreServer over loopback: each input is what one client sends (after a
// valid handshake when the first byte is even, so requests are reached), then the client
// closes its side and reads until the server closes. The server must neither crash nor hang.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/net/socket_util.h"
#include "base/store/tcp_store_protocol.h"
#include "base/store/tcp_store_server.h"

namespace {

int ServerPort() {
  static int port = [] {
    plexus::TCPStoreServerOptions options;
    options.host = "127.0.0.1";
    options.max_frame_bytes = 1 << 20;
    auto server = plexus::TCPStoreServer::Start(options);
    if (!server.ok()) abort();
    static std::unique_ptr<plexus::TCPStoreServer> kept = std::move(server).value();
    return kept->port();
  }();
  return port;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto socket = plexus::ConnectTcpWithRetry("127.0.0.1", ServerPort(), deadline);
  if (!socket.ok()) abort();
  std::string bytes;
  if (data[0] % 2 == 0) bytes = plexus::tcp_store::HandshakeBytes(0);
  bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)plexus::SendAll(socket->get(), bytes, deadline);  // The server may close early.
  shutdown(socket->get(), SHUT_WR);
  char buffer[4096];
  while (true) {
    absl::Status status = plexus::RecvExact(socket->get(), buffer, 1, deadline);
    if (absl::IsDeadlineExceeded(status)) abort();  // The server never closed: a hang.
    if (!status.ok()) break;
  }
  return 0;
}
