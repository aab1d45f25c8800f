#include "base/auth/mutual_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"
#include "base/net/socket_util.h"

namespace plexus::auth {
namespace {

constexpr uint8_t kVersion = 1;
constexpr char kAccepted = 1;
// Sent alone before closing on a plexus hello refused before the challenge: it tells the client
// this was a verdict, where a close with nothing sent may be a server shedding connections.
constexpr char kRefusedHello = kRefusalByte;

std::string Nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    abort();  // No randomness: authenticating with a predictable nonce would be worse.
  }
  return nonce;
}

// HMAC-SHA256(secret, role | purpose | first | second | channel binding).
std::string Mac(absl::string_view secret, absl::string_view role, Purpose purpose,
                absl::string_view first, absl::string_view second, absl::string_view binding) {
  const std::string message = absl::StrCat(
      "plexus-auth-1 ", role, std::string(1, static_cast<char>(purpose)), first, second, binding);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length);
  return std::string(reinterpret_cast<const char*>(mac), length);
}

bool SameMac(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ClientHello(Purpose purpose, absl::string_view nonce) {
  std::string hello(kHelloMagic);
  hello.push_back(static_cast<char>(kVersion));
  hello.push_back(static_cast<char>(purpose));
  hello.append(2, '\0');
  hello.append(nonce.data(), nonce.size());
  return hello;
}

// Checks a client hello; the nonce on success, else why not.
absl::StatusOr<std::string> ParseClientHello(absl::string_view hello, Purpose purpose) {
  if (hello.substr(0, 4) != kHelloMagic) {
    return absl::UnauthenticatedError(
        "sent no authentication (this side requires a secret: set PLEXUS_SECRET on every rank)");
  }
  if (static_cast<uint8_t>(hello[4]) != kVersion) {
    return absl::UnauthenticatedError(
        absl::StrCat("authentication version ", static_cast<int>(hello[4]), " is not supported"));
  }
  if (static_cast<uint8_t>(hello[5]) != static_cast<uint8_t>(purpose)) {
    return absl::UnauthenticatedError("authenticated for another kind of connection");
  }
  return std::string(hello.substr(8, kNonceBytes));
}

}  // namespace

absl::Status CheckSecret(absl::string_view secret) {
  if (secret.empty() || secret.size() >= kMinSecretBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the shared secret has ", secret.size(),
                                                 " bytes; use at least ", kMinSecretBytes));
}

absl::StatusOr<std::string> SecretFromEnvironment() {
  std::string secret;
  if (const char* value = ReadEnvironment("PLEXUS_SECRET"); value != nullptr && *value != '\0') {
    secret = value;
  } else if (const char* path = ReadEnvironment("PLEXUS_SECRET_FILE");
             path != nullptr && *path != '\0') {
    std::ifstream file(path);
    if (!file) {
      return absl::InvalidArgumentError(absl::StrCat("PLEXUS_SECRET_FILE: cannot read ", path));
    }
    std::stringstream contents;
    contents << file.rdbuf();
    secret = contents.str();
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  }
  if (absl::Status status = CheckSecret(secret); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("PLEXUS_SECRET: ", status.message()));
  }
  return secret;
}

absl::StatusOr<std::string> ResolveSecret(const std::optional<std::string>& given) {
  if (!given.has_value()) return SecretFromEnvironment();
  RETURN_IF_ERROR(CheckSecret(*given));
  return *given;
}

absl::Status AuthenticateToServer(int fd, absl::string_view secret, Purpose purpose,
                                  absl::string_view peer, absl::Time deadline,
                                  StreamCipher* cipher) {
  const std::string binding = cipher != nullptr ? cipher->ChannelBinding() : "";
  const std::string client_nonce = Nonce();
  RETURN_IF_ERROR(SendAll(fd, cipher, ClientHello(purpose, client_nonce), deadline));
  char challenge[kServerChallengeBytes];
  // Its first byte apart: a server that refuses the hello sends one byte and closes, one that
  // closes with none sent never judged anything.
  absl::Status received = RecvExact(fd, cipher, challenge, 1, deadline);
  if (received.ok()) {
    received = RecvExact(fd, cipher, challenge + 1, sizeof(challenge) - 1, deadline);
    if (absl::IsUnavailable(received)) {
      return absl::UnauthenticatedError(
          absl::StrCat(peer,
                       " refused this side's hello (it serves another kind of connection "
                       "or protocol version, or has no secret configured): ",
                       received.message()));
    }
  }
  if (absl::IsDeadlineExceeded(received)) {
    // Silence is not a refusal: a refusing server closes at once.
    return absl::DeadlineExceededError(
        absl::StrCat("authenticating to ", peer,
                     ": no answer in time (is it overloaded or out of file "
                     "descriptors - its log says so - or not a plexus server?)"));
  }
  if (absl::IsUnavailable(received)) {
    // Closed before its challenge: it never judged the secret.
    return absl::UnavailableError(absl::StrCat(
        "authenticating to ", peer, ": ", received.message(),
        " before its challenge (a server out of file descriptors closes new connections to make "
        "room - its log says so; one without a secret closes them too)"));
  }
  if (!received.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("authenticating to ", peer, ": ", received.message()));
  }
  const absl::string_view server_nonce(challenge, kNonceBytes);
  const absl::string_view server_mac(challenge + kNonceBytes, kMacBytes);
  if (!SameMac(server_mac, Mac(secret, "server", purpose, client_nonce, server_nonce, binding))) {
    return absl::UnauthenticatedError(
        absl::StrCat(peer, " does not know the shared secret (its proof is wrong)"));
  }
  RETURN_IF_ERROR(SendAll(
      fd, cipher, Mac(secret, "client", purpose, server_nonce, client_nonce, binding), deadline));
  char verdict = 0;
  received = RecvExact(fd, cipher, &verdict, 1, deadline);
  if (!received.ok() || verdict != kAccepted) {
    return absl::UnauthenticatedError(
        absl::StrCat(peer, " refused this side's proof of the shared secret"));
  }
  return absl::OkStatus();
}

absl::Status AuthenticateClient(int fd, absl::string_view secret, Purpose purpose,
                                absl::string_view peer, absl::Time deadline, StreamCipher* cipher) {
  ServerHandshake handshake{std::string(secret), purpose,
                            cipher != nullptr ? cipher->ChannelBinding() : ""};
  std::string input;
  std::string output;
  // The magic first: a client speaking the protocol directly may send less than a hello.
  for (size_t total : {kHelloMagic.size(), kClientHelloBytes, kClientProofBytes}) {
    const size_t have = input.size();
    input.resize(total);
    absl::Status received = RecvExact(fd, cipher, input.data() + have, total - have, deadline);
    if (!received.ok()) {
      return absl::UnauthenticatedError(
          absl::StrCat(peer, " did not complete authentication: ", received.message()));
    }
    const ServerHandshake::Step step = handshake.Feed(input, output);
    if (!output.empty()) {
      RETURN_IF_ERROR(SendAll(fd, cipher, output, deadline));
      output.clear();
    }
    if (step == ServerHandshake::Step::kAccepted) return absl::OkStatus();
    if (step == ServerHandshake::Step::kRejected) {
      return absl::UnauthenticatedError(absl::StrCat(peer, ": ", handshake.reason()));
    }
  }
  return absl::InternalError("authentication ended without a verdict");
}

ServerHandshake::ServerHandshake(std::string secret, Purpose purpose, std::string binding)
    : secret_(std::move(secret)), purpose_(purpose), binding_(std::move(binding)) {}

ServerHandshake::Step ServerHandshake::Feed(std::string& input, std::string& output) {
  if (!challenged_) {
    // Judge the magic as soon as it is there: a client speaking the protocol directly may
    // send fewer bytes than a hello and wait.
    if (input.size() >= kHelloMagic.size() &&
        absl::string_view(input).substr(0, 4) != kHelloMagic) {
      reason_ = std::string(ParseClientHello(input, purpose_).status().message());
      // A plexus peer speaking another protocol (the store's, no secret) hears the verdict;
      // anything else hears nothing.
      if (absl::StartsWith(input, kPlexusMagicPrefix)) output.push_back(kRefusedHello);
      return Step::kRejected;
    }
    if (input.size() < kClientHelloBytes) return Step::kNeedMore;
    absl::StatusOr<std::string> nonce =
        ParseClientHello(absl::string_view(input).substr(0, kClientHelloBytes), purpose_);
    if (!nonce.ok()) {
      reason_ = std::string(nonce.status().message());
      output.push_back(kRefusedHello);
      return Step::kRejected;
    }
    input.erase(0, kClientHelloBytes);
    client_nonce_ = *nonce;
    server_nonce_ = Nonce();
    output += server_nonce_;
    output += Mac(secret_, "server", purpose_, client_nonce_, server_nonce_, binding_);
    challenged_ = true;
  }
  if (input.size() < kClientProofBytes) return Step::kNeedMore;
  const bool proven =
      SameMac(absl::string_view(input).substr(0, kClientProofBytes),
              Mac(secret_, "client", purpose_, server_nonce_, client_nonce_, binding_));
  input.erase(0, kClientProofBytes);
  if (!proven) {
    reason_ = "does not know the shared secret (its proof is wrong)";
    return Step::kRejected;
  }
  output.push_back(kAccepted);
  return Step::kAccepted;
}

}  // namespace plexus::auth
