// TLS 1.3 for plexus connections (store, data and elastic master), from OpenSSL's libssl.
//
// Configured by a certificate and its private key (PEM), and optionally a CA bundle: with a
// CA, both ends present certificates and each verifies the other's chain against it (mutual
// TLS; host names are not checked, ranks connect by address); without one, traffic is
// encrypted but peers are not verified, which stops eavesdroppers and, combined with a shared
// secret (mutual_auth.h, bound to the TLS channel), active interceptors too.
//
// Environment: PLEXUS_TLS_CERT, PLEXUS_TLS_KEY, PLEXUS_TLS_CA. Every end of a connection must
// agree: a TLS client meeting a clear-text server (or the other way round) is refused and
// logged, never downgraded.
#ifndef PLEXUS_BASE_AUTH_TLS_H_
#define PLEXUS_BASE_AUTH_TLS_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/net/socket_util.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace plexus::auth {

struct TlsFiles {
  std::string certificate;  // PEM chain, leaf first.
  std::string private_key;  // PEM.
  std::string authority;    // PEM bundle of trusted CAs; "": peers are not verified.
  bool enabled() const { return !certificate.empty(); }
};

// From PLEXUS_TLS_CERT / PLEXUS_TLS_KEY / PLEXUS_TLS_CA; disabled when PLEXUS_TLS_CERT is
// unset. InvalidArgument when a key or CA is given without a certificate, or the reverse.
absl::StatusOr<TlsFiles> TlsFilesFromEnvironment();

class TlsSession;

// One configuration's OpenSSL context; shared by every connection that uses it (thread-safe).
class TlsContext {
 public:
  enum class Role { kClient, kServer };

  // InvalidArgument naming the file when one cannot be read or the key does not match.
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Create(const TlsFiles& files);
  // `given` when set (null if disabled), else the environment's (created once per process).
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Resolve(
      const std::optional<TlsFiles>& given);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool verifies_peers() const { return verifies_peers_; }

  // A session on a connected socket whose handshake has not started (for event loops).
  std::unique_ptr<TlsSession> NewSession(int fd, Role role) const;
  // Runs the handshake on a blocking-style socket by `deadline`. Unauthenticated naming
  // `peer` when the other end speaks no TLS or its certificate is refused.
  absl::StatusOr<std::unique_ptr<TlsSession>> Secure(int fd, Role role, absl::string_view peer,
                                                     absl::Time deadline) const;

 private:
  TlsContext(SSL_CTX* context, std::string own_certificate, std::string authority)
      : context_(context),
        verifies_peers_(!authority.empty()),
        own_certificate_(std::make_shared<const std::string>(std::move(own_certificate))),
        authority_(std::make_shared<const std::string>(std::move(authority))) {}
  SSL_CTX* const context_;
  const bool verifies_peers_;
  const std::shared_ptr<const std::string> own_certificate_;  // For errors (TlsSession's).
  const std::shared_ptr<const std::string> authority_;
};

// One TLS connection. Reads and writes are non-blocking whatever the socket's mode; writes
// never raise SIGPIPE.
class TlsSession final : public StreamCipher {
 public:
  ~TlsSession() override;

  enum class Progress { kDone, kWantRead, kWantWrite };
  // Advances the handshake; Unauthenticated with OpenSSL's reason when it fails, naming the
  // certificate refused: the peer's (subject, issuer, expiry, and this side's CA file) when
  // this side refused it, this side's (file, subject) when the peer's alert says it did.
  absl::StatusOr<Progress> Handshake();

  ssize_t Read(void* buffer, size_t size) override;
  ssize_t Write(const iovec* iov, int count) override;
  bool HasPendingOutput() const override { return !pending_.empty(); }
  int Flush() override;
  std::string ChannelBinding() const override;
  std::string LastError() const override { return error_; }
  void ReadAhead() override;

 private:
  friend class TlsContext;
  TlsSession(SSL* ssl, const std::shared_ptr<const std::string>& own_certificate,
             const std::shared_ptr<const std::string>& authority)
      : ssl_(ssl), own_certificate_(own_certificate), authority_(authority) {}
  // Maps a failed SSL_read / SSL_write to errno; returns -1, or 0 for a clean end.
  ssize_t Failed(int result);

  SSL* const ssl_;
  // For errors: "certificate FILE (subject ..., valid until ...)", and the CA file ("": none).
  const std::shared_ptr<const std::string> own_certificate_;
  const std::shared_ptr<const std::string> authority_;
  std::string pending_;  // Plaintext of a record OpenSSL sealed but could not finish sending.
  std::string scratch_;  // Small frames are sealed as one record.
  std::string error_;    // OpenSSL's reason for the last fatal failure.
};

}  // namespace plexus::auth

#endif  // PLEXUS_BASE_AUTH_TLS_H_
