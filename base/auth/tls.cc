#include "base/auth/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/core/environment.h"
#include "base/core/mutex.h"
#include "base/core/status_macros.h"

namespace plexus::auth {
namespace {

// The largest TLS record's plaintext: with partial writes, SSL_write seals one record a call.
constexpr size_t kRecordBytes = 16384;
constexpr absl::string_view kBindingLabel = "EXPORTER-plexus-auth";

// OpenSSL's error queue as text (and empties it).
std::string OpenSslErrors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    absl::StrAppend(&text, text.empty() ? "" : "; ", buffer);
  }
  return text;
}

// A socket BIO that never blocks and never raises SIGPIPE (OpenSSL's own uses write()).
int SocketOf(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n =
        send(SocketOf(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int BioRead(BIO* bio, char* out, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = recv(SocketOf(bio), out, static_cast<size_t>(size), MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long BioControl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "plexus socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioControl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  return method;
}

// A certificate as people know it: "subject CN=rank1, issued by CN=plexus test CA, valid
// until Nov 26 07:00:00 2036 GMT".
std::string Describe(X509* certificate) {
  if (certificate == nullptr) return "no certificate";
  BIO* out = BIO_new(BIO_s_mem());
  if (out == nullptr) return "a certificate";
  BIO_puts(out, "subject ");
  X509_NAME_print_ex(out, X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253);
  BIO_puts(out, ", issued by ");
  X509_NAME_print_ex(out, X509_get_issuer_name(certificate), 0, XN_FLAG_RFC2253);
  BIO_puts(out, ", valid until ");
  ASN1_TIME_print(out, X509_get0_notAfter(certificate));
  char* data = nullptr;
  const long size = BIO_get_mem_data(out, &data);
  std::string text(data, static_cast<size_t>(std::max<long>(size, 0)));
  BIO_free(out);
  return text;
}

// Why this side refused the peer's certificate, recorded by the verify callback of the
// handshake running on this thread (OpenSSL calls it from inside SSL_do_handshake).
thread_local std::string t_refused_certificate;
thread_local const char* t_authority = nullptr;

int RecordRefusal(int preverified, X509_STORE_CTX* store) {
  if (preverified == 1 || !t_refused_certificate.empty()) return preverified;
  const int error = X509_STORE_CTX_get_error(store);
  t_refused_certificate = absl::StrCat(
      "this side refused the peer's certificate (",
      Describe(X509_STORE_CTX_get_current_cert(store)), "): ", X509_verify_cert_error_string(error),
      t_authority != nullptr ? absl::StrCat(", checked against ", t_authority) : "");
  return preverified;
}

// The alerts by which a peer says it refused this side's certificate.
bool PeerRefusedOurCertificate(absl::string_view reason) {
  for (absl::string_view alert :
       {"alert unknown ca", "alert certificate expired", "alert bad certificate",
        "alert certificate unknown", "alert certificate revoked", "alert unsupported certificate",
        "alert certificate required", "alert decrypt error"}) {
    if (absl::StrContains(reason, alert)) return true;
  }
  return false;
}

std::string Getenv(const char* name) {
  const char* value = ReadEnvironment(name);
  return value != nullptr ? value : "";
}

}  // namespace

absl::StatusOr<TlsFiles> TlsFilesFromEnvironment() {
  TlsFiles files{Getenv("PLEXUS_TLS_CERT"), Getenv("PLEXUS_TLS_KEY"), Getenv("PLEXUS_TLS_CA")};
  if (files.certificate.empty() && (!files.private_key.empty() || !files.authority.empty())) {
    return absl::InvalidArgumentError(
        "PLEXUS_TLS_KEY or PLEXUS_TLS_CA is set but PLEXUS_TLS_CERT is not: TLS needs this "
        "side's certificate too");
  }
  if (!files.certificate.empty() && files.private_key.empty()) {
    return absl::InvalidArgumentError("PLEXUS_TLS_CERT is set but PLEXUS_TLS_KEY is not");
  }
  return files;
}

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Create(const TlsFiles& files) {
  if (!files.enabled()) return absl::InvalidArgumentError("TLS: no certificate given");
  if (files.private_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: certificate ", files.certificate, " given without its private key"));
  }
  ERR_clear_error();
  SSL_CTX* context = SSL_CTX_new(TLS_method());
  if (context == nullptr) {
    return absl::InternalError(absl::StrCat("TLS: SSL_CTX_new: ", OpenSslErrors()));
  }
  auto fail = [&](absl::string_view what) {
    std::string reason = OpenSslErrors();
    SSL_CTX_free(context);
    return absl::InvalidArgumentError(absl::StrCat("TLS: ", what, ": ", reason));
  };
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  // AES-128-GCM first: the fastest where AES-NI is (every x86 server plexus targets).
  SSL_CTX_set_ciphersuites(
      context, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  // A vanished peer is a lost peer whatever the record layer says; no resumption tickets.
  SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(context, 0);
  SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(context, files.certificate.c_str()) != 1) {
    return fail(absl::StrCat("cannot use certificate ", files.certificate));
  }
  if (SSL_CTX_use_PrivateKey_file(context, files.private_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail(absl::StrCat("cannot use private key ", files.private_key));
  }
  if (SSL_CTX_check_private_key(context) != 1) {
    return fail(absl::StrCat("private key ", files.private_key, " does not match certificate ",
                             files.certificate));
  }
  const bool verifies = !files.authority.empty();
  if (verifies) {
    if (SSL_CTX_load_verify_locations(context, files.authority.c_str(), nullptr) != 1) {
      return fail(absl::StrCat("cannot load CA bundle ", files.authority));
    }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, RecordRefusal);
  } else {
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nullptr);
  }
  std::string own = absl::StrCat("certificate ", files.certificate, " (",
                                 Describe(SSL_CTX_get0_certificate(context)), ")");
  return std::shared_ptr<const TlsContext>(
      new TlsContext(context, std::move(own), verifies ? files.authority : ""));
}

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Resolve(
    const std::optional<TlsFiles>& given) {
  if (given.has_value()) {
    if (!given->enabled()) return std::shared_ptr<const TlsContext>();
    return Create(*given);
  }
  ASSIGN_OR_RETURN(TlsFiles files, TlsFilesFromEnvironment());
  if (!files.enabled()) return std::shared_ptr<const TlsContext>();
  // Every connection of a process shares one context per configuration.
  static Mutex mu;
  static std::string* cached_key = new std::string;
  static std::shared_ptr<const TlsContext>* cached = new std::shared_ptr<const TlsContext>;
  const std::string key =
      absl::StrCat(files.certificate, "\n", files.private_key, "\n", files.authority);
  MutexLock lock(mu);
  if (*cached == nullptr || *cached_key != key) {
    absl::StatusOr<std::shared_ptr<const TlsContext>> made = Create(files);
    if (!made.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("PLEXUS_TLS_CERT/KEY/CA: ", made.status().message()));
    }
    *cached = *made;
    *cached_key = key;
  }
  return *cached;
}

TlsContext::~TlsContext() { SSL_CTX_free(context_); }

std::unique_ptr<TlsSession> TlsContext::NewSession(int fd, Role role) const {
  SSL* ssl = SSL_new(context_);
  BIO* bio = BIO_new(SocketMethod());
  if (ssl == nullptr || bio == nullptr) {
    SSL_free(ssl);
    BIO_free(bio);
    return nullptr;  // Out of memory.
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);
  if (role == Role::kClient) {
    SSL_set_connect_state(ssl);
  } else {
    SSL_set_accept_state(ssl);
  }
  return std::unique_ptr<TlsSession>(new TlsSession(ssl, own_certificate_, authority_));
}

absl::StatusOr<std::unique_ptr<TlsSession>> TlsContext::Secure(int fd, Role role,
                                                               absl::string_view peer,
                                                               absl::Time deadline) const {
  std::unique_ptr<TlsSession> session = NewSession(fd, role);
  if (session == nullptr) return absl::ResourceExhaustedError("TLS: cannot allocate a session");
  while (true) {
    absl::StatusOr<TlsSession::Progress> progress = session->Handshake();
    if (!progress.ok()) {
      return absl::UnauthenticatedError(
          absl::StrCat("TLS with ", peer, ": ", progress.status().message()));
    }
    if (*progress == TlsSession::Progress::kDone) return session;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("TLS with ", peer, ": the handshake did not finish in time"));
    }
    pollfd pfd{
        fd, static_cast<short>(*progress == TlsSession::Progress::kWantRead ? POLLIN : POLLOUT), 0};
    const int64_t ms = std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, INT_MAX);
    if (poll(&pfd, 1, static_cast<int>(ms)) < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("TLS with ", peer, ": poll: ", strerror(errno)));
    }
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

absl::StatusOr<TlsSession::Progress> TlsSession::Handshake() {
  ERR_clear_error();
  t_refused_certificate.clear();
  t_authority = authority_->empty() ? nullptr : authority_->c_str();
  const int result = SSL_do_handshake(ssl_);
  t_authority = nullptr;
  if (result == 1) return Progress::kDone;
  const int saved_errno = errno;
  const int error = SSL_get_error(ssl_, result);
  if (error == SSL_ERROR_WANT_READ) return Progress::kWantRead;
  if (error == SSL_ERROR_WANT_WRITE) return Progress::kWantWrite;
  std::string reason = OpenSslErrors();
  if (reason.empty()) {
    reason = error == SSL_ERROR_SYSCALL && saved_errno != 0
                 ? absl::StrCat("socket: ", strerror(saved_errno))
                 : "the peer closed the connection (does it use TLS?)";
  }
  if (!t_refused_certificate.empty()) {
    absl::StrAppend(&reason, "; ", t_refused_certificate);
  } else if (const long verified = SSL_get_verify_result(ssl_); verified != X509_V_OK) {
    absl::StrAppend(&reason, "; peer certificate: ", X509_verify_cert_error_string(verified));
  }
  if (PeerRefusedOurCertificate(reason)) {
    absl::StrAppend(&reason, "; the peer refused this side's ", *own_certificate_);
  }
  t_refused_certificate.clear();
  return absl::UnauthenticatedError(absl::StrCat("TLS handshake failed: ", reason));
}

ssize_t TlsSession::Failed(int result) {
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:  // Only a key update would want this; plexus sends none.
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      errno = saved_errno != 0 && saved_errno != EAGAIN ? saved_errno : ECONNRESET;
      return -1;
    default:  // A record that fails authentication, an alert: the connection is unusable.
      error_ = OpenSslErrors();
      if (error_.empty()) error_ = "protocol error";
      // TLS 1.3: a client's handshake ends before the server checks its certificate, so the
      // refusal arrives as an alert on the first read.
      if (PeerRefusedOurCertificate(error_)) {
        absl::StrAppend(&error_, "; the peer refused this side's ", *own_certificate_);
      }
      errno = EPROTO;
      return -1;
  }
}

ssize_t TlsSession::Read(void* buffer, size_t size) {
  auto* out = static_cast<char*>(buffer);
  size_t done = 0;
  // Until OpenSSL wants the socket: a short count then means nothing is buffered inside, so a
  // caller may sleep on the socket's readiness.
  while (done < size) {
    ERR_clear_error();
    const int n =
        SSL_read(ssl_, out + done, static_cast<int>(std::min<size_t>(size - done, INT_MAX)));
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (done > 0) {
      ERR_clear_error();  // The failure repeats on the next call.
      break;
    }
    return Failed(n);
  }
  return static_cast<ssize_t>(done);
}

ssize_t TlsSession::Write(const iovec* iov, int count) {
  if (Flush() < 0) return -1;
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  if (total == 0) return 0;
  const char* data;
  size_t size;
  if (count > 1 && total <= kRecordBytes) {  // A frame header and a small payload: one record.
    scratch_.clear();
    for (int i = 0; i < count; ++i) {
      scratch_.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    }
    data = scratch_.data();
    size = total;
  } else {
    int first = 0;
    while (iov[first].iov_len == 0) ++first;
    data = static_cast<const char*>(iov[first].iov_base);
    size = iov[first].iov_len;
  }
  size_t done = 0;
  while (done < size) {
    const size_t piece = std::min(size - done, kRecordBytes);
    ERR_clear_error();
    const int n = SSL_write(ssl_, data + done, static_cast<int>(piece));
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    const int saved_errno = errno;
    if (SSL_get_error(ssl_, n) == SSL_ERROR_WANT_WRITE) {
      // Sealed and partly sent: it counts as taken. Flush finishes it with the same bytes,
      // as OpenSSL requires of a retried write.
      pending_.assign(data + done, piece);
      done += piece;
      break;
    }
    if (done > 0) break;
    errno = saved_errno;
    const ssize_t failed = Failed(n);
    if (failed == 0) errno = EPIPE;
    return -1;
  }
  return static_cast<ssize_t>(done);
}

int TlsSession::Flush() {
  if (pending_.empty()) return 0;
  ERR_clear_error();
  const int n = SSL_write(ssl_, pending_.data(), static_cast<int>(pending_.size()));
  if (n > 0) {
    pending_.clear();
    return 0;
  }
  if (Failed(n) == 0) errno = EPIPE;
  return -1;
}

void TlsSession::ReadAhead() { SSL_set_read_ahead(ssl_, 1); }

std::string TlsSession::ChannelBinding() const {
  unsigned char bytes[32];
  if (SSL_export_keying_material(ssl_, bytes, sizeof(bytes), kBindingLabel.data(),
                                 kBindingLabel.size(), nullptr, 0, 0) != 1) {
    return "";  // Before the handshake: the MACs then fail, as they should.
  }
  return std::string(reinterpret_cast<const char*>(bytes), sizeof(bytes));
}

}  // namespace plexus::auth
