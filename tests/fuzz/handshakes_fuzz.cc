// Fuzzes the first bytes every plexus listener parses: the authentication exchange (fed in
// chunks the input chooses), the tcp mesh hello and the TCPStore handshake.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/tcp/tcp_connect.h"
#include "base/auth/mutual_auth.h"
#include "base/store/tcp_store_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (selector % 3) {
    case 0: {
      plexus::auth::ServerHandshake handshake("a secret of sixteen bytes",
                                              plexus::auth::Purpose::kData);
      std::string input;
      std::string output;
      // Delivered in pieces of 1..16 bytes, as a socket might.
      size_t at = 0;
      const size_t piece = 1 + (selector >> 4);
      while (at < bytes.size()) {
        input.append(bytes, at, piece);
        at += piece;
        const auto step = handshake.Feed(input, output);
        if (step != plexus::auth::ServerHandshake::Step::kNeedMore) break;
      }
      break;
    }
    case 1: {
      plexus::tcp::MeshOptions options{nullptr, 1, 4, "world", "127.0.0.1", {}, {}, {}};
      (void)plexus::tcp::ParseHello(bytes, options);
      break;
    }
    default: {
      uint16_t field = 0;
      (void)plexus::tcp_store::ParseHandshake(bytes, &field);
      break;
    }
  }
  return 0;
}
