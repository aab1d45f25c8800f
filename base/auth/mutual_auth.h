// Mutual authentication of a connection with a shared secret: HMAC-SHA256 challenge-response
// over fresh nonces (OpenSSL's libcrypto), run before a connection's own protocol when a
// secret is configured (PLEXUS_SECRET / PLEXUS_SECRET_FILE, or a `secret` option).
//
//   client -> server  "PLXA", version (1), purpose (1), 2 zero bytes, client nonce (32)  [40]
//   server -> client  server nonce (32), HMAC(secret, "server" purpose cn sn)           [64]
//   client -> server  HMAC(secret, "client" purpose sn cn)                               [32]
//   server -> client  1 (accepted)                                                       [1]
//
// Each side proves the secret without revealing it, over nonces the other chose; the purpose
// (store, data, master) keeps an answer from one kind of connection from serving another. A
// server reads nothing else until the client is through, and closes a connection whose hello or
// MAC is wrong, naming the peer address in its log. Never a hand-written hash: HMAC and the
// random bytes come from libcrypto, comparisons are constant-time.
#ifndef PLEXUS_BASE_AUTH_MUTUAL_AUTH_H_
#define PLEXUS_BASE_AUTH_MUTUAL_AUTH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/net/socket_util.h"

namespace plexus::auth {

enum class Purpose : uint8_t { kStore = 1, kData = 2, kMaster = 3 };

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kClientHelloBytes = 8 + kNonceBytes;
inline constexpr size_t kServerChallengeBytes = kNonceBytes + kMacBytes;
inline constexpr size_t kClientProofBytes = kMacBytes;
// The first bytes of a client hello: a server can tell an authenticating client from one
// speaking its protocol directly.
inline constexpr absl::string_view kHelloMagic = "PLXA";
// Secrets shorter than this are refused: they can be guessed offline from one exchange.
inline constexpr size_t kMinSecretBytes = 16;

// PLEXUS_SECRET, else the contents of PLEXUS_SECRET_FILE (trailing newline dropped), else ""
// (no authentication). InvalidArgument for a secret shorter than kMinSecretBytes or an
// unreadable file.
absl::StatusOr<std::string> SecretFromEnvironment();
// InvalidArgument unless `secret` is empty or at least kMinSecretBytes long.
absl::Status CheckSecret(absl::string_view secret);
// The secret a component uses: `given` when set (checked), else SecretFromEnvironment().
absl::StatusOr<std::string> ResolveSecret(const std::optional<std::string>& given);

// The client side on a blocking-style socket (deadline-bounded). Unauthenticated when the
// server's proof is wrong or it refuses ours (closes the connection); Unavailable when it
// closes before its challenge, before judging anything (ConnectWithHandshake tries again);
// DeadlineExceeded when it says nothing by `deadline` (overloaded, or not a plexus server).
// Messages name `peer`.
// Over TLS, pass the connection's cipher: the exchange runs inside it and both MACs cover its
// channel binding, so a proof cannot be relayed into another TLS session.
absl::Status AuthenticateToServer(int fd, absl::string_view secret, Purpose purpose,
                                  absl::string_view peer, absl::Time deadline,
                                  StreamCipher* cipher = nullptr);

// The server side on a blocking-style socket. Unauthenticated (naming `peer`) when the client
// does not know the secret; nothing beyond the exchange is read.
absl::Status AuthenticateClient(int fd, absl::string_view secret, Purpose purpose,
                                absl::string_view peer, absl::Time deadline,
                                StreamCipher* cipher = nullptr);

// The server side for event loops: feed what arrived, send what it asks for.
class ServerHandshake {
 public:
  // `binding`: the TLS channel binding (StreamCipher::ChannelBinding), or "" in the clear.
  ServerHandshake(std::string secret, Purpose purpose, std::string binding = "");

  enum class Step { kNeedMore, kAccepted, kRejected };
  // Consumes bytes from the front of `input` (only the exchange's own) and appends what to
  // send to `output`. kRejected: close the connection; reason() says why.
  Step Feed(std::string& input, std::string& output);
  const std::string& reason() const { return reason_; }

 private:
  const std::string secret_;
  const Purpose purpose_;
  const std::string binding_;
  std::string server_nonce_;
  std::string client_nonce_;
  bool challenged_ = false;
  std::string reason_;
};

}  // namespace plexus::auth

#endif  // PLEXUS_BASE_AUTH_MUTUAL_AUTH_H_
