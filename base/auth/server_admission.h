// How an accepted connection gets into a plexus server that runs an event loop (the TCPStore
// server, the elastic master, a forming tcp mesh's listener): the TLS handshake when the server
// has TLS, then the secret's challenge (mutual_auth.h) when it has a secret, bound to the TLS
// channel. The server calls it as the socket becomes ready (through ServerConnection, which
// holds the buffers); the steps and their order live here.
#ifndef PLEXUS_BASE_AUTH_SERVER_ADMISSION_H_
#define PLEXUS_BASE_AUTH_SERVER_ADMISSION_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/tls.h"

namespace plexus::auth {

class ServerAdmission {
 public:
  enum class Step { kNeedMore, kDone, kRejected };

  // `tls`: the server's TLS context, or null in the clear; `secret`: "" for none. Null when a
  // TLS session could not be made (out of memory): the server drops the connection.
  static std::unique_ptr<ServerAdmission> Begin(int fd, const TlsContext* tls,
                                                const std::string& secret, Purpose purpose);

  // While !secure(), when the socket is readable (or writable, if wants_write()): advances the
  // TLS handshake. kDone once established; kRejected: reason() says why.
  Step AdvanceTls();
  bool secure() const { return session_ == nullptr || tls_established_; }
  bool wants_write() const { return tls_wants_write_; }

  // Once secure(): the secret's exchange over what arrived (its own bytes are consumed from
  // `input`), appending what to send to `output`. kDone at once when there is no secret.
  Step Feed(std::string& input, std::string& output);

  // Not through yet: only the handshakes' few bytes are legitimate from this client.
  bool authenticating() const { return !secure() || challenge_ != nullptr; }
  const std::string& reason() const { return reason_; }

  // The connection's TLS session, for its reads and writes (null in the clear). Owned here:
  // keep the admission as long as the connection.
  TlsSession* session() const { return session_.get(); }
  // Hands the session over (ServerConnection::Release); the admission is done with after it.
  std::unique_ptr<TlsSession> TakeSession() { return std::move(session_); }

 private:
  ServerAdmission(std::unique_ptr<TlsSession> session, std::string secret, Purpose purpose);

  std::unique_ptr<TlsSession> session_;
  const std::string secret_;
  const Purpose purpose_;
  bool tls_established_ = false;
  bool tls_wants_write_ = false;
  std::unique_ptr<ServerHandshake> challenge_;  // While the secret's exchange runs.
  std::string reason_;
};

// The client's side of the same admission, on a blocking connected socket: TLS as a client when
// `tls` is set, then the secret's exchange when `secret` is not empty, both by `deadline`.
// `failed` says which step a failure came from, for the caller's own words about it.
struct ClientAdmission {
  enum class Step { kNone, kTls, kSecret };
  std::unique_ptr<StreamCipher> cipher;  // Null in the clear.
  Step failed = Step::kNone;
  absl::Status status;
};
ClientAdmission AdmitToServer(int fd, const TlsContext* tls, absl::string_view secret,
                              Purpose purpose, const std::string& server, absl::Time deadline);

}  // namespace plexus::auth

#endif  // PLEXUS_BASE_AUTH_SERVER_ADMISSION_H_
