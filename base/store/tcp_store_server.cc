#include "base/store/tcp_store_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/server_connection.h"
#include "base/core/event_journal.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/frames.h"
#include "base/store/store.h"

namespace plexus {

using tcp_store::Decoder;
using tcp_store::Encoder;
using tcp_store::Opcode;

namespace {

constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;

std::string OkFrame() { return Encoder().U8(static_cast<uint8_t>(absl::StatusCode::kOk)).Frame(); }

std::string ErrorFrame(const absl::Status& status) {
  return Encoder().U8(static_cast<uint8_t>(status.code())).Str(status.message()).Frame();
}

}  // namespace

struct TCPStoreServer::Waiter {
  Opcode op;
  std::vector<std::string> keys;
  int64_t client_count = 0;  // For kWaitClients.
  absl::Duration timeout;
  absl::Time deadline;
};

struct TCPStoreServer::Connection {
  uint64_t id = 0;
  std::unique_ptr<auth::ServerConnection> stream;  // Socket, admission, buffers.
  bool handshaken = false;
  bool broken = false;           // A write failed; closed by the loop after the current event.
  std::optional<Waiter> waiter;  // At most one parked request; input pauses behind it.
  // How often the client wants to hear while its request is parked (from its handshake).
  absl::Duration beat_period = absl::InfiniteDuration();
};

absl::StatusOr<std::unique_ptr<TCPStoreServer>> TCPStoreServer::Start(
    TCPStoreServerOptions options) {
  ASSIGN_OR_RETURN(ScopedFd listener, ListenTcp(options.host, options.port));
  ASSIGN_OR_RETURN(int port, LocalPort(listener.get()));
  absl::StatusOr<std::unique_ptr<EventPoller>> poller = EventPoller::Create();
  if (!poller.ok()) {
    return absl::InternalError(absl::StrCat("TCPStore server: ", poller.status().message()));
  }
  return std::unique_ptr<TCPStoreServer>(
      new TCPStoreServer(std::move(options), std::move(listener), port, std::move(*poller)));
}

TCPStoreServer::TCPStoreServer(TCPStoreServerOptions options, ScopedFd listener, int port,
                               std::unique_ptr<EventPoller> poller)
    : options_(std::move(options)), port_(port), poller_(std::move(poller)) {
  auth::ServerListener::Options listening;
  listening.server = "TCPStore server";
  listening.tls = options_.tls.get();
  listening.secret = options_.secret;
  listening.purpose = auth::Purpose::kStore;
  listening.admission_timeout = options_.handshake_timeout;
  listener_ = std::make_unique<auth::ServerListener>(
      std::move(listener), *poller_, std::move(listening),
      [this](uint64_t id, std::unique_ptr<auth::ServerConnection> stream) {
        Adopt(id, std::move(stream));
      },
      [this](uint64_t id, const std::string& reason) {
        CloseConnection(id, reason, /*rejected=*/true);
      });
  thread_ = std::thread([this] { Loop(); });
}

TCPStoreServer::~TCPStoreServer() {
  stopping_.store(true);
  poller_->Wake();
  thread_.join();
}

void TCPStoreServer::Loop() {
  while (!stopping_.load()) {
    absl::Status waited = poller_->Wait(NextDeadline(), [this](uint64_t id, uint32_t events) {
      if (id == auth::ServerListener::kTag) {
        listener_->AcceptAll();
        return;
      }
      if (events & EPOLLOUT) OnWritable(id);
      if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) OnReadable(id);
    });
    if (!waited.ok()) {
      Log(LogLevel::kError, absl::StrCat("TCPStore server: ", waited.message()));
      break;
    }
    listener_->Tick();
    ServeWaiters();
    BeatToWaiters();
  }
  listener_->SettleAll();
  connections_.clear();
}

void TCPStoreServer::Adopt(uint64_t id, std::unique_ptr<auth::ServerConnection> stream) {
  auto connection = std::make_unique<Connection>();
  connection->id = id;
  poller_->Watch(stream->fd(), id, EPOLLIN);
  connection->stream = std::move(stream);
  connections_[id] = std::move(connection);
}

std::string TCPStoreServer::RefusalReport() const {
  MutexLock lock(refusals_mu_);
  if (refused_count_ == 0) return "";
  return absl::StrCat(refused_count_, " connection(s) refused, the last ", last_refusal_);
}

void TCPStoreServer::OnReadable(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = *it->second;
  auth::ServerConnection& stream = *connection.stream;
  if (!stream.admission().secure() && (!AdvanceTls(connection) || !stream.admission().secure())) {
    return;
  }
  // Bounded by one maximal frame plus its header and the handshake; a peer that sends more
  // while a request is parked is misbehaving.
  // Before authentication only the exchange's few bytes are legitimate.
  const bool authenticating = stream.admission().authenticating();
  const size_t limit =
      authenticating ? size_t{4096}
                     : options_.max_frame_bytes + kFrameLengthBytes + tcp_store::kHandshakeBytes;
  switch (stream.ReadAvailable(limit).end) {
    case auth::ServerConnection::ReadEnd::kDrained:
      break;
    case auth::ServerConnection::ReadEnd::kOverLimit:
      CloseConnection(id, "sent more than one maximal frame ahead", /*rejected=*/true);
      return;
    case auth::ServerConnection::ReadEnd::kClosed:
      // A client that gives up mid-authentication found this server's proof wrong: it knows
      // another secret (or none).
      CloseConnection(id,
                      authenticating ? "it closed the connection during authentication (its "
                                       "shared secret or TLS settings differ from this store's?)"
                                     : "peer closed the connection",
                      /*rejected=*/authenticating);
      return;
    case auth::ServerConnection::ReadEnd::kFailed:
      CloseConnection(id, absl::StrCat("recv: ", stream.error()), /*rejected=*/false);
      return;
  }
  if (ProcessInput(connection) && connection.broken) {
    CloseConnection(id, "write failed", /*rejected=*/false);
  }
}

void TCPStoreServer::OnWritable(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = *it->second;
  if (!connection.stream->admission().secure()) {
    if (AdvanceTls(connection) && connection.stream->admission().secure()) OnReadable(id);
    return;
  }
  Reply(connection, "");
  if (connection.broken) {
    CloseConnection(id, "write failed", /*rejected=*/false);
    return;
  }
  if (!connection.stream->wants_write() && ProcessInput(connection) && connection.broken) {
    CloseConnection(id, "write failed", /*rejected=*/false);
  }
}

bool TCPStoreServer::ProcessInput(Connection& connection) {
  const uint64_t id = connection.id;
  auth::ServerAdmission& admission = connection.stream->admission();
  std::string& in = connection.stream->input();
  size_t pos = 0;
  if (admission.authenticating()) {
    std::string reply;
    const auth::ServerAdmission::Step step = admission.Feed(in, reply);
    if (!reply.empty()) Reply(connection, reply);
    if (step == auth::ServerAdmission::Step::kRejected) {
      CloseConnection(id, absl::StrCat("authentication: ", admission.reason()),
                      /*rejected=*/true);
      return false;
    }
    if (step == auth::ServerAdmission::Step::kNeedMore) return true;
  }
  if (!connection.handshaken) {
    if (in.size() < tcp_store::kHandshakeBytes) return true;
    uint16_t beat_field;
    absl::Status handshake = tcp_store::ParseHandshake(
        absl::string_view(in).substr(0, tcp_store::kHandshakeBytes), &beat_field);
    if (!handshake.ok()) {
      if (absl::StartsWith(in, kPlexusMagicPrefix)) {
        Reply(connection, std::string(1, kRefusalByte));
      }
      CloseConnection(id, absl::StrCat("handshake: ", handshake.message()), /*rejected=*/true);
      return false;
    }
    connection.handshaken = true;
    listener_->Settle(id);
    connection.beat_period = tcp_store::BeatPeriod(beat_field);
    connected_.fetch_add(1);
    Reply(connection, tcp_store::HandshakeBytes(0));
    pos = tcp_store::kHandshakeBytes;
  }
  while (!connection.waiter.has_value() && !connection.broken &&
         connection.stream->queued_bytes() < options_.max_frame_bytes) {
    const FrameAtFront frame =
        PeekFrame(absl::string_view(in).substr(pos), options_.max_frame_bytes);
    if (frame.state == FrameAtFront::State::kPartial) break;
    if (frame.state == FrameAtFront::State::kOversized) {
      CloseConnection(id, OversizedFrame(frame.length, options_.max_frame_bytes),
                      /*rejected=*/true);
      return false;
    }
    absl::Status handled = HandleRequest(connection, frame.payload);
    if (!handled.ok()) {
      CloseConnection(id, absl::StrCat("bad request: ", handled.message()), /*rejected=*/true);
      return false;
    }
    pos += frame.size();
  }
  in.erase(0, pos);
  return true;
}

absl::Status TCPStoreServer::HandleRequest(Connection& connection, absl::string_view payload) {
  Decoder in(payload);
  ASSIGN_OR_RETURN(uint8_t raw_op, in.U8());
  const Opcode op = static_cast<Opcode>(raw_op);
  switch (op) {
    case Opcode::kGet: {
      ASSIGN_OR_RETURN(std::string key, in.Str());
      return Park(connection, op, {std::move(key)}, 0, in);
    }
    case Opcode::kWait:
    case Opcode::kMultiGet: {
      ASSIGN_OR_RETURN(std::vector<std::string> keys, in.StrList());
      return Park(connection, op, std::move(keys), 0, in);
    }
    case Opcode::kWaitClients: {
      ASSIGN_OR_RETURN(int64_t count, in.I64());
      return Park(connection, op, {}, count, in);
    }
    case Opcode::kSet:
    case Opcode::kAdd:
    case Opcode::kCompareSet:
    case Opcode::kCheck:
    case Opcode::kDelete:
    case Opcode::kNumKeys:
    case Opcode::kMultiSet:
    case Opcode::kAppend:
    case Opcode::kClock: {
      ASSIGN_OR_RETURN(std::string reply, Answer(op, in));
      Reply(connection, reply);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown opcode ", raw_op));
}

absl::Status TCPStoreServer::Park(Connection& connection, Opcode op, std::vector<std::string> keys,
                                  int64_t client_count, Decoder& in) {
  ASSIGN_OR_RETURN(int64_t timeout_ms, in.I64());
  RETURN_IF_ERROR(in.Done());
  const absl::Duration timeout = absl::Milliseconds(std::clamp<int64_t>(timeout_ms, 0, kMaxWaitMs));
  Waiter waiter{op, std::move(keys), client_count, timeout, absl::Now() + timeout};
  if (WaiterReady(waiter)) {
    AnswerWaiter(connection, waiter);
  } else {
    connection.waiter = std::move(waiter);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TCPStoreServer::Answer(Opcode op, Decoder& in) {
  switch (op) {
    case Opcode::kSet:
    case Opcode::kAppend: {
      ASSIGN_OR_RETURN(std::string key, in.Str());
      ASSIGN_OR_RETURN(std::string value, in.Str());
      RETURN_IF_ERROR(in.Done());
      if (op == Opcode::kSet) {
        table_.Set(key, value);
      } else {
        table_.Append(key, value);
      }
      return OkFrame();
    }
    case Opcode::kAdd: {
      ASSIGN_OR_RETURN(std::string key, in.Str());
      ASSIGN_OR_RETURN(int64_t delta, in.I64());
      RETURN_IF_ERROR(in.Done());
      absl::StatusOr<int64_t> value = table_.Add(key, delta);
      return value.ok() ? Encoder().U8(0).I64(*value).Frame() : ErrorFrame(value.status());
    }
    case Opcode::kCompareSet: {
      ASSIGN_OR_RETURN(std::string key, in.Str());
      ASSIGN_OR_RETURN(std::string expected, in.Str());
      ASSIGN_OR_RETURN(std::string desired, in.Str());
      RETURN_IF_ERROR(in.Done());
      return Encoder().U8(0).Str(table_.CompareSet(key, expected, desired)).Frame();
    }
    case Opcode::kCheck: {
      ASSIGN_OR_RETURN(std::vector<std::string> keys, in.StrList());
      RETURN_IF_ERROR(in.Done());
      return Encoder().U8(0).U8(table_.ContainsAll(keys) ? 1 : 0).Frame();
    }
    case Opcode::kDelete: {
      ASSIGN_OR_RETURN(std::string key, in.Str());
      RETURN_IF_ERROR(in.Done());
      return Encoder().U8(0).U8(table_.Delete(key) ? 1 : 0).Frame();
    }
    case Opcode::kNumKeys:
      RETURN_IF_ERROR(in.Done());
      return Encoder().U8(0).I64(table_.size()).Frame();
    case Opcode::kMultiSet: {
      ASSIGN_OR_RETURN(std::vector<std::string> keys, in.StrList());
      ASSIGN_OR_RETURN(std::vector<std::string> values, in.StrList());
      RETURN_IF_ERROR(in.Done());
      if (absl::Status sizes = CheckMultiSetSizes(keys, values); !sizes.ok()) {
        return ErrorFrame(sizes);
      }
      for (size_t i = 0; i < keys.size(); ++i) table_.Set(keys[i], values[i]);
      return OkFrame();
    }
    case Opcode::kClock:
      RETURN_IF_ERROR(in.Done());
      return Encoder().U8(0).I64(UnixNanos()).Frame();
    case Opcode::kGet:  // Park's.
    case Opcode::kWait:
    case Opcode::kMultiGet:
    case Opcode::kWaitClients:
      break;
  }
  return absl::InternalError(absl::StrCat("opcode ", static_cast<int>(op), " waits"));
}

bool TCPStoreServer::WaiterReady(const Waiter& waiter) const {
  if (waiter.op == Opcode::kWaitClients) return connected_.load() >= waiter.client_count;
  return table_.ContainsAll(waiter.keys);
}

void TCPStoreServer::AnswerWaiter(Connection& connection, const Waiter& waiter) {
  if (!WaiterReady(waiter)) {
    if (waiter.op == Opcode::kWaitClients) {
      ReplyError(connection,
                 absl::DeadlineExceededError(absl::StrCat(
                     "timed out after ", absl::FormatDuration(waiter.timeout), " waiting for ",
                     waiter.client_count, " clients; ", JoinedDetail())));
    } else {
      ReplyError(connection,
                 WaitTimeoutError(waiter.timeout, table_.Missing(waiter.keys), JoinedDetail()));
    }
    return;
  }
  Encoder out;
  out.U8(0);
  if (waiter.op == Opcode::kGet) out.Str(*table_.Find(waiter.keys[0]));
  if (waiter.op == Opcode::kMultiGet) {
    std::vector<std::string> values;
    values.reserve(waiter.keys.size());
    for (const std::string& key : waiter.keys) values.push_back(*table_.Find(key));
    out.StrList(values);
  }
  Reply(connection, out.Frame());
}

void TCPStoreServer::ServeWaiters() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> answered;
  for (auto& [id, connection] : connections_) {
    if (!connection->waiter.has_value()) continue;
    if (!WaiterReady(*connection->waiter) && connection->waiter->deadline > now) continue;
    Waiter waiter = std::move(*connection->waiter);
    connection->waiter.reset();
    AnswerWaiter(*connection, waiter);
    answered.push_back(id);
  }
  // Requests queued behind an answered waiter run now; they may change the table and so
  // satisfy other waiters, which the next loop iteration serves.
  for (uint64_t id : answered) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    if (ProcessInput(*it->second) && it->second->broken) {
      CloseConnection(id, "write failed", /*rejected=*/false);
    }
  }
}

void TCPStoreServer::BeatToWaiters() {
  const absl::Time now = absl::Now();
  std::vector<uint64_t> broken;
  for (auto& [id, connection] : connections_) {
    if (!connection->waiter.has_value() || connection->broken ||
        !connection->stream->BeatDue(now, connection->beat_period)) {
      continue;
    }
    Reply(*connection, tcp_store::HeartbeatFrame());
    if (connection->broken) broken.push_back(id);
  }
  for (uint64_t id : broken) CloseConnection(id, "write failed", /*rejected=*/false);
}

absl::Time TCPStoreServer::NextDeadline() const {
  absl::Time next = listener_->NextDeadline();
  for (const auto& [id, connection] : connections_) {
    if (connection->waiter.has_value()) {
      next = std::min({next, connection->waiter->deadline,
                       connection->stream->NextBeat(connection->beat_period)});
    }
  }
  return next;
}

std::string TCPStoreServer::JoinedDetail() const {
  if (options_.expected_clients > 0) {
    return absl::StrCat(connected_.load(), "/", options_.expected_clients, " clients joined");
  }
  return absl::StrCat(connected_.load(), " clients connected");
}

bool TCPStoreServer::AdvanceTls(Connection& connection) {
  auth::ServerAdmission& admission = connection.stream->admission();
  if (admission.AdvanceTls() == auth::ServerAdmission::Step::kRejected) {
    const std::string reason = admission.reason();  // CloseConnection destroys it.
    CloseConnection(connection.id, reason, /*rejected=*/true);
    return false;
  }
  connection.stream->UpdateWatch(*poller_, connection.id);
  return true;
}

void TCPStoreServer::Reply(Connection& connection, const std::string& frame) {
  if (!connection.stream->Send(frame)) {
    connection.broken = true;
    return;
  }
  connection.stream->UpdateWatch(*poller_, connection.id);
}

void TCPStoreServer::ReplyError(Connection& connection, const absl::Status& status) {
  Reply(connection, ErrorFrame(status));
}

void TCPStoreServer::CloseConnection(uint64_t id, absl::string_view reason, bool rejected) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = *it->second;
  if (connection.handshaken) connected_.fetch_sub(1);
  const int fd = connection.stream->fd();
  const std::string& peer = connection.stream->address();
  const std::string detail =
      absl::StrCat("on port ", port_, ": closing connection ", id, " from ", peer, ": ", reason);
  if (rejected) {
    refusal_log_.Refused(detail);
    MutexLock lock(refusals_mu_);
    refused_count_ = refusal_log_.count();
    last_refusal_ = absl::StrCat("from ", peer, ": ", reason);
  } else {
    Log(LogLevel::kDebug, absl::StrCat("TCPStore server ", detail));
  }
  if (!connection.handshaken) listener_->Settle(id);
  if (rejected) DiscardUnreadAndShutdown(fd);
  poller_->Forget(fd);
  connections_.erase(it);
}

}  // namespace plexus
