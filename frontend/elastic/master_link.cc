#include "frontend/elastic/master_link.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/server_admission.h"
#include "base/core/deadline.h"
#include "base/core/status_macros.h"
#include "base/net/frames.h"

namespace plexus::elastic {
namespace {

absl::Status MasterFailure(absl::string_view what) {
  return WithResult(absl::UnavailableError(what), Result::kMasterConnectionFailed);
}

// The likely causes of a hello left unwelcomed: a master closes the connections it refuses
// (no secret, no TLS, a distrusted certificate) without saying why.
std::string WhyNoWelcome(const absl::Status& status, bool no_secret, bool no_tls) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return " (nothing answered the hello in time: is an elastic master serving there?)";
  }
  std::vector<std::string> causes;
  if (no_secret) {
    causes.push_back(
        "a master that requires a shared secret closes connections from peers "
        "without one: set PLEXUS_SECRET or secret=");
  }
  causes.push_back(no_tls ? "a master that requires TLS closes clear-text connections: set "
                            "PLEXUS_TLS_CERT, PLEXUS_TLS_KEY and PLEXUS_TLS_CA"
                          : "a master that does not trust this peer's certificate closes the "
                            "connection: is it signed by the CA the master trusts, and unexpired?");
  return absl::StrCat(" (", absl::StrJoin(causes, "; "), ")");
}

// Reads one whole frame by `deadline` (used for the welcome, before the reader starts).
absl::StatusOr<Message> ReadFrame(const Connection& connection, absl::Time deadline) {
  ASSIGN_OR_RETURN(
      const std::string payload,
      ReceiveFrame(connection.fd.get(), connection.cipher.get(), kMaxFrameBytes, deadline));
  return DecodePayload(payload);
}

// A peer's side of one connection attempt: TLS and the secret's exchange. A close before the
// master answered is tried again on a new connection: a master out of descriptors closes
// strangers to make room.
class MasterHandshake {
 public:
  MasterHandshake(const std::string& master, const std::string& secret,
                  const std::shared_ptr<const auth::TlsContext>& tls, absl::Time deadline)
      : master_(master), secret_(secret), tls_(tls), deadline_(deadline) {}

  absl::Status operator()(int fd) {
    auth::ClientAdmission admitted =
        auth::AdmitToServer(fd, tls_.get(), secret_, auth::Purpose::kMaster, master_, deadline_);
    cipher_ = std::move(admitted.cipher);
    if (admitted.status.ok()) return admitted.status;
    const absl::Status& failure = admitted.status;
    if (admitted.failed == auth::ClientAdmission::Step::kTls) {
      refused_ = true;
      return WithResult(
          absl::UnauthenticatedError(absl::StrCat(
              failure.message(),
              " (this peer and the master must each trust the CA that signed the other's "
              "certificate, PLEXUS_TLS_CA, and neither certificate may have expired)")),
          Result::kMasterConnectionFailed);
    }
    if (absl::IsUnavailable(failure)) return failure;  // Closed unanswered: tried again.
    refused_ = true;
    std::string message(failure.message());
    if (failure.code() == absl::StatusCode::kUnauthenticated) {
      absl::StrAppend(&message,
                      ": this peer's shared secret differs from the master's "
                      "(PLEXUS_SECRET / PLEXUS_SECRET_FILE, or secret=)");
    }
    return WithResult(absl::Status(failure.code(), message), Result::kMasterConnectionFailed);
  }

  // TLS or the secret's exchange failed: reported as it is, not as an unreachable master.
  bool refused() const { return refused_; }
  std::unique_ptr<StreamCipher> TakeCipher() { return std::move(cipher_); }

 private:
  const std::string& master_;
  const std::string& secret_;
  const std::shared_ptr<const auth::TlsContext>& tls_;
  const absl::Time deadline_;
  std::unique_ptr<StreamCipher> cipher_;
  bool refused_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MasterLink>> MasterLink::Connect(
    const std::string& host, int port, int64_t group, absl::Time deadline, Callbacks callbacks,
    const std::string& secret, const std::shared_ptr<const auth::TlsContext>& tls) {
  const std::string where = HostPort(host, port);
  const std::string master = absl::StrCat("the elastic master at ", where);
  MasterHandshake handshake(master, secret, tls, deadline);
  auto fd =
      ConnectWithHandshake(host, port, deadline, [&handshake](int fd) { return handshake(fd); });
  if (!fd.ok()) {
    if (handshake.refused()) return fd.status();
    return MasterFailure(
        absl::StrCat("cannot reach the elastic master at ", where, ": ", fd.status().message()));
  }
  Connection connection{std::move(fd).value(), handshake.TakeCipher()};
  absl::Status sent =
      SendAll(connection.fd.get(), connection.cipher.get(),
              EncodeFrame({MessageType::kHello, {kMagic, kProtocolVersion, group}, ""}), deadline);
  auto welcome = sent.ok() ? ReadFrame(connection, deadline) : absl::StatusOr<Message>(sent);
  if (!welcome.ok()) {
    const std::string causes = WhyNoWelcome(welcome.status(), secret.empty(), tls == nullptr);
    return MasterFailure(absl::StrCat("the elastic master at ", where,
                                      " did not welcome this peer: ", welcome.status().message(),
                                      causes));
  }
  if (welcome->type != MessageType::kWelcome || welcome->ints.size() != 3) {
    return MasterFailure(absl::StrCat(where,
                                      " answered the hello with something else than a "
                                      "welcome: is it an elastic master?"));
  }
  return std::unique_ptr<MasterLink>(
      new MasterLink(std::move(connection), welcome->ints[0], static_cast<int>(welcome->ints[1]),
                     absl::Milliseconds(welcome->ints[2]), std::move(callbacks)));
}

MasterLink::MasterLink(Connection connection, int64_t peer_id, int store_port,
                       absl::Duration heartbeat_timeout, Callbacks callbacks)
    : fd_(std::move(connection.fd)),
      cipher_(std::move(connection.cipher)),
      peer_id_(peer_id),
      store_port_(store_port),
      heartbeat_timeout_(heartbeat_timeout),
      callbacks_(std::move(callbacks)),
      last_sent_(absl::Now()) {
  reader_ = std::thread([this] { ReadLoop(); });
}

MasterLink::~MasterLink() {
  stopping_.store(true);
  shutdown(fd_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
}

absl::Status MasterLink::lost() const {
  MutexLock lock(mu_);
  return lost_;
}

absl::Status MasterLink::Send(const Message& message) {
  RETURN_IF_ERROR(lost());
  MutexLock lock(send_mu_);
  absl::Status status = SendAll(fd_.get(), cipher_.get(), EncodeFrame(message),
                                absl::Now() + heartbeat_timeout_, &cipher_mu_);
  last_sent_ = absl::Now();
  if (!status.ok()) {
    status = MasterFailure(absl::StrCat("lost the elastic master: ", status.message()));
    shutdown(fd_.get(), SHUT_RDWR);  // The reader reports it.
  }
  return status;
}

absl::StatusOr<int64_t> MasterLink::Request(MessageType type, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::vector<int64_t> values, Call(type, {}, "", deadline));
  return values.empty() ? 0 : values[0];
}

absl::StatusOr<std::vector<int64_t>> MasterLink::Call(MessageType type,
                                                      std::vector<int64_t> arguments,
                                                      std::string text, absl::Time deadline) {
  int64_t id;
  {
    MutexLock lock(mu_);
    id = next_request_++;
    replies_[id];
  }
  arguments.insert(arguments.begin(), id);
  if (absl::Status sent = Send({type, std::move(arguments), std::move(text)}); !sent.ok()) {
    MutexLock lock(mu_);
    replies_.erase(id);
    return sent;
  }
  UniqueLock lock(mu_);
  while (!replies_[id].done && lost_.ok()) {
    if (replied_.wait_until(lock, SteadyDeadline(deadline - absl::Now())) ==
            std::cv_status::timeout &&
        absl::Now() >= deadline) {
      break;
    }
  }
  Reply reply = std::move(replies_[id]);
  replies_.erase(id);
  if (reply.done) {
    if (!reply.status.ok()) return reply.status;
    return std::move(reply.values);
  }
  if (!lost_.ok()) return lost_;
  return absl::DeadlineExceededError("no answer from the elastic master in time");
}

void MasterLink::Leave() {
  (void)Send({MessageType::kLeave, {}, ""});
  stopping_.store(true);
  shutdown(fd_.get(), SHUT_WR);
}

void MasterLink::Lose(const absl::Status& status) {
  {
    MutexLock lock(mu_);
    if (!lost_.ok()) return;
    lost_ = status;
  }
  replied_.notify_all();
  if (callbacks_.on_lost) callbacks_.on_lost(status);
}

void MasterLink::OnMessage(const Message& message) {
  switch (message.type) {
    case MessageType::kHeartbeat:
      return;
    case MessageType::kTopology: {
      auto topology = ReadTopology(message.ints);
      if (topology.ok() && callbacks_.on_topology) callbacks_.on_topology(*topology);
      return;
    }
    case MessageType::kOpOutcome:
      if (message.ints.size() == kOpKeyInts + 1 && callbacks_.on_outcome) {
        callbacks_.on_outcome(ReadOpKey(message.ints),
                              StatusFromWire(message.ints[kOpKeyInts], message.text));
      }
      return;
    case MessageType::kOpTurn:
      if (message.ints.size() == kOpKeyInts + 1 && callbacks_.on_turn) {
        callbacks_.on_turn(ReadOpKey(message.ints), message.ints[kOpKeyInts]);
      }
      return;
    case MessageType::kReply: {
      if (message.ints.size() < 3) return;
      {
        MutexLock lock(mu_);
        auto it = replies_.find(message.ints[0]);
        if (it == replies_.end()) return;
        it->second.done = true;
        it->second.status = StatusFromWire(message.ints[1], message.text);
        it->second.values.assign(message.ints.begin() + 2, message.ints.end());
      }
      replied_.notify_all();
      return;
    }
    default:
      return;
  }
}

absl::StatusOr<size_t> MasterLink::ReadFrames(std::string& rx, bool& more) {
  char buffer[16384];
  ssize_t n;
  if (cipher_ != nullptr) {
    MutexLock lock(cipher_mu_);
    n = cipher_->Read(buffer, sizeof(buffer));
  } else {
    n = recv(fd_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
  }
  if (n == 0) {
    return MasterFailure(
        "the elastic master closed the connection: it stopped, or it expelled this peer (silent "
        "past its heartbeat timeout, e.g. while stopped); connect() again to rejoin");
  }
  if (n < 0 && errno != EINTR && errno != EAGAIN) {
    return MasterFailure(absl::StrCat("the master connection failed: ", strerror(errno)));
  }
  more = n == static_cast<ssize_t>(sizeof(buffer));
  if (n < 0) return 0;
  rx.append(buffer, n);
  size_t at = 0;
  while (true) {
    const FrameAtFront frame = PeekFrame(absl::string_view(rx).substr(at), kMaxFrameBytes);
    if (frame.state == FrameAtFront::State::kPartial) break;
    if (frame.state == FrameAtFront::State::kOversized) {
      return MasterFailure(
          absl::StrCat("the master sent ", OversizedFrame(frame.length, kMaxFrameBytes)));
    }
    auto message = DecodePayload(frame.payload);
    at += frame.size();
    if (!message.ok()) {
      return MasterFailure(absl::StrCat("bad frame from the master: ", message.status().message()));
    }
    OnMessage(*message);
  }
  rx.erase(0, at);
  return static_cast<size_t>(n);
}

void MasterLink::ReadLoop() {
  std::string rx;
  absl::Time last_heard = absl::Now();
  bool more = false;  // A full read: TLS may hold more than the socket shows.
  while (true) {
    // Sleeps until a byte arrives (a shutdown() by Leave, Send or the destructor wakes it too),
    // the master has been silent too long, or a heartbeat is due.
    absl::Time wake = last_heard + heartbeat_timeout_;
    {
      MutexLock lock(send_mu_);
      wake = std::min(wake, last_sent_ + heartbeat_timeout_ / 5);
    }
    pollfd pfd{fd_.get(), POLLIN, 0};
    const int ready = poll(&pfd, 1, more ? 0 : PollTimeoutMs(wake));
    if (stopping_.load() && lost().ok()) {
      Lose(MasterFailure("this peer left the elastic master"));
      return;
    }
    if (ready < 0 && errno != EINTR) {
      Lose(MasterFailure(absl::StrCat("poll on the master connection: ", strerror(errno))));
      return;
    }
    if (ready > 0 || more) {
      absl::StatusOr<size_t> read = ReadFrames(rx, more);
      if (!read.ok()) {
        Lose(read.status());
        return;
      }
      if (*read > 0) last_heard = absl::Now();
    }
    const absl::Time now = absl::Now();
    if (now - last_heard > heartbeat_timeout_) {
      Lose(MasterFailure(absl::StrCat("the elastic master has been silent for ",
                                      absl::FormatDuration(now - last_heard))));
      shutdown(fd_.get(), SHUT_RDWR);
      return;
    }
    bool beat;
    {
      MutexLock lock(send_mu_);
      beat = now - last_sent_ > heartbeat_timeout_ / 5;
    }
    if (beat) (void)Send({MessageType::kHeartbeat, {}, ""});
  }
}

}  // namespace plexus::elastic
