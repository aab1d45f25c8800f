#include "base/auth/server_admission.h"

#include <utility>

namespace plexus::auth {

std::unique_ptr<ServerAdmission> ServerAdmission::Begin(int fd, const TlsContext* tls,
                                                        const std::string& secret,
                                                        Purpose purpose) {
  std::unique_ptr<TlsSession> session;
  if (tls != nullptr) {
    session = tls->NewSession(fd, TlsContext::Role::kServer);
    if (session == nullptr) return nullptr;
  }
  return std::unique_ptr<ServerAdmission>(new ServerAdmission(std::move(session), secret, purpose));
}

ServerAdmission::ServerAdmission(std::unique_ptr<TlsSession> session, std::string secret,
                                 Purpose purpose)
    : session_(std::move(session)), secret_(std::move(secret)), purpose_(purpose) {
  // In the clear the challenge starts at once; over TLS, once the channel (its binding) exists.
  if (session_ == nullptr && !secret_.empty()) {
    challenge_ = std::make_unique<ServerHandshake>(secret_, purpose_);
  }
}

ServerAdmission::Step ServerAdmission::AdvanceTls() {
  if (secure()) return Step::kDone;
  absl::StatusOr<TlsSession::Progress> progress = session_->Handshake();
  if (!progress.ok()) {
    reason_ = std::string(progress.status().message());
    return Step::kRejected;
  }
  tls_wants_write_ = *progress == TlsSession::Progress::kWantWrite;
  if (*progress != TlsSession::Progress::kDone) return Step::kNeedMore;
  tls_established_ = true;
  if (!secret_.empty()) {
    challenge_ = std::make_unique<ServerHandshake>(secret_, purpose_, session_->ChannelBinding());
  }
  return Step::kDone;
}

ServerAdmission::Step ServerAdmission::Feed(std::string& input, std::string& output) {
  if (!secure()) return Step::kNeedMore;
  if (challenge_ == nullptr) return Step::kDone;
  switch (challenge_->Feed(input, output)) {
    case ServerHandshake::Step::kNeedMore:
      return Step::kNeedMore;
    case ServerHandshake::Step::kRejected:
      reason_ = challenge_->reason();
      return Step::kRejected;
    case ServerHandshake::Step::kAccepted:
      challenge_.reset();
      return Step::kDone;
  }
  return Step::kRejected;
}

ClientAdmission AdmitToServer(int fd, const TlsContext* tls, absl::string_view secret,
                              Purpose purpose, const std::string& server, absl::Time deadline) {
  ClientAdmission admitted;
  if (tls != nullptr) {
    auto session = tls->Secure(fd, TlsContext::Role::kClient, server, deadline);
    if (!session.ok()) {
      admitted.failed = ClientAdmission::Step::kTls;
      admitted.status = session.status();
      return admitted;
    }
    admitted.cipher = std::move(session).value();
  }
  if (secret.empty()) return admitted;
  admitted.status =
      AuthenticateToServer(fd, secret, purpose, server, deadline, admitted.cipher.get());
  if (!admitted.status.ok()) admitted.failed = ClientAdmission::Step::kSecret;
  return admitted;
}

}  // namespace plexus::auth
