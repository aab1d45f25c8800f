#include "base/store/tcp_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/server_admission.h"
#include "base/core/heartbeat.h"
#include "base/core/status_macros.h"
#include "base/net/frames.h"

namespace plexus {

using tcp_store::Decoder;
using tcp_store::Encoder;
using tcp_store::Opcode;

namespace {

// Extra time a client allows beyond a server-side wait, for the answer to travel.
constexpr absl::Duration kReplyGrace = absl::Seconds(5);

uint8_t OpByte(Opcode op) { return static_cast<uint8_t>(op); }

absl::StatusOr<std::unique_ptr<TCPStoreServer>> StartServer(
    const TCPStoreOptions& options, std::shared_ptr<const auth::TlsContext> tls) {
  TCPStoreServerOptions server_options;
  server_options.host = options.bind_host.empty() ? options.host : options.bind_host;
  server_options.port = options.port;
  server_options.expected_clients = options.world_size;
  server_options.max_frame_bytes = options.max_frame_bytes;
  server_options.secret = *options.secret;
  server_options.tls = std::move(tls);
  auto started = TCPStoreServer::Start(server_options);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("TCPStore server: ", started.status().message()));
  }
  return started;
}

// The client's side of one connection attempt: TLS, the secret's exchange and the store's own
// handshake. A close before the server answered is tried again on a new connection (it may have
// shed this one to make room).
class ClientHandshake {
 public:
  ClientHandshake(const TCPStoreOptions& options, int port,
                  std::shared_ptr<const auth::TlsContext> tls, absl::Time deadline)
      : options_(options),
        port_(port),
        tls_(std::move(tls)),
        deadline_(deadline),
        server_name_(absl::StrCat("TCPStore server ", HostPort(options.host, port))) {}

  absl::Status operator()(int fd) {
    unanswered_ = false;
    auth::ClientAdmission admitted = auth::AdmitToServer(
        fd, tls_.get(), *options_.secret, auth::Purpose::kStore, server_name_, deadline_);
    cipher_ = std::move(admitted.cipher);
    if (!admitted.status.ok()) {
      // The secret's exchange closed unanswered: perhaps a server shedding connections.
      unanswered_ = admitted.failed == auth::ClientAdmission::Step::kSecret &&
                    absl::IsUnavailable(admitted.status);
      return admitted.status;
    }
    absl::Status exchanged = SendAll(
        fd, cipher_.get(),
        tcp_store::HandshakeBytes(tcp_store::BeatField(HeartbeatPeriod(*options_.heartbeat))),
        deadline_);
    char reply[tcp_store::kHandshakeBytes];
    // Its first byte apart: a close with nothing sent may be a server shedding connections (try
    // again), one after a byte is a refusal.
    if (exchanged.ok()) exchanged = RecvExact(fd, cipher_.get(), reply, 1, deadline_);
    const bool answered = exchanged.ok();
    if (exchanged.ok()) {
      exchanged = RecvExact(fd, cipher_.get(), reply + 1, sizeof(reply) - 1, deadline_);
    }
    uint16_t server_status = 0;
    if (exchanged.ok()) {
      exchanged =
          tcp_store::ParseHandshake(absl::string_view(reply, sizeof(reply)), &server_status);
    }
    if (exchanged.ok()) return exchanged;
    unanswered_ = absl::IsUnavailable(exchanged) && !answered;
    return Failure(exchanged, answered);
  }

  // Every try was closed unanswered.
  bool unanswered() const { return unanswered_; }
  std::unique_ptr<StreamCipher> TakeCipher() { return std::move(cipher_); }

 private:
  absl::Status Failure(const absl::Status& exchanged, bool answered) const {
    std::string message = absl::StrCat("handshake with ", HostPort(options_.host, port_),
                                       " failed: ", exchanged.message());
    if (!answered) {
      absl::StrAppend(&message,
                      " (a server out of file descriptors closes new connections to make room: "
                      "its log says so)");
    }
    if (options_.secret->empty()) {
      absl::StrAppend(&message,
                      " (a server that requires a shared secret closes connections without one: "
                      "set PLEXUS_SECRET)");
    }
    if (tls_ == nullptr) {
      absl::StrAppend(&message,
                      " (a server that requires TLS closes clear-text connections: set "
                      "PLEXUS_TLS_CERT, PLEXUS_TLS_KEY and PLEXUS_TLS_CA)");
    }
    return absl::Status(
        unanswered_ ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnauthenticated, message);
  }

  const TCPStoreOptions& options_;
  const int port_;
  const std::shared_ptr<const auth::TlsContext> tls_;
  const absl::Time deadline_;
  const std::string server_name_;
  std::unique_ptr<StreamCipher> cipher_;
  bool unanswered_ = false;  // The last try was closed before the server sent anything.
};

}  // namespace

absl::StatusOr<std::unique_ptr<TCPStore>> TCPStore::Create(TCPStoreOptions options) {
  ASSIGN_OR_RETURN(options.secret, auth::ResolveSecret(options.secret));
  ASSIGN_OR_RETURN(std::shared_ptr<const auth::TlsContext> tls,
                   auth::TlsContext::Resolve(options.tls));
  std::unique_ptr<TCPStoreServer> server;
  int port = options.port;
  if (options.is_server) {
    ASSIGN_OR_RETURN(server, StartServer(options, tls));
    port = server->port();
  }
  if (!options.heartbeat.has_value()) {
    ASSIGN_OR_RETURN(options.heartbeat, HeartbeatFromEnvironment());
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  ClientHandshake handshake(options, port, tls, deadline);
  auto connected = ConnectWithHandshake(options.host, port, deadline,
                                        [&handshake](int fd) { return handshake(fd); });
  if (!connected.ok()) {
    // Closed unanswered every time: a refusal that sends nothing (TLS refuses clear text so),
    // or a server out of descriptors the whole while; either way, final.
    return absl::Status(
        handshake.unanswered() ? absl::StatusCode::kUnauthenticated : connected.status().code(),
        absl::StrCat("TCPStore client: ", connected.status().message()));
  }
  Connection socket{std::move(connected).value(), handshake.TakeCipher()};
  auto store =
      std::unique_ptr<TCPStore>(new TCPStore(options, std::move(server), port, std::move(socket)));
  if (store->is_server() && options.wait_for_workers && options.world_size > 0) {
    RETURN_IF_ERROR(store->WaitForClients(options.world_size,
                                          std::max(deadline - absl::Now(), absl::ZeroDuration())));
  }
  return store;
}

TCPStore::TCPStore(TCPStoreOptions options, std::unique_ptr<TCPStoreServer> server, int port,
                   Connection socket)
    : Store(options.timeout),
      options_(std::move(options)),
      server_(std::move(server)),
      port_(port),
      socket_(std::move(socket)) {}

TCPStore::~TCPStore() {
  MutexLock lock(mu_);
  socket_ = Connection();  // Close before the server (if ours) shuts down.
}

absl::StatusOr<std::string> TCPStore::Call(absl::string_view op_name, const Encoder& request,
                                           absl::Duration wait) {
  MutexLock lock(mu_);
  if (!broken_.ok()) return broken_;
  // A parked request may legitimately take `wait`; the answer then needs time to travel.
  const absl::Duration grace = wait > absl::ZeroDuration() ? kReplyGrace : absl::ZeroDuration();
  const absl::Time deadline = absl::Now() + std::max(wait, timeout()) + grace;
  auto lost = [&](const absl::Status& cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = absl::UnavailableError(absl::StrCat("TCPStore ", HostPort(options_.host, port_),
                                                  ": connection lost during ", op_name, ": ",
                                                  cause.message()));
    socket_ = Connection();
    return broken_;
  };
  absl::Status sent = SendAll(socket_.fd.get(), socket_.cipher.get(), request.Frame(), deadline);
  if (!sent.ok()) return lost(sent);
  absl::StatusOr<std::string> response = ReadResponse(deadline);
  if (!response.ok()) return lost(response.status());
  const std::string& payload = *response;
  const auto code = static_cast<absl::StatusCode>(static_cast<uint8_t>(payload[0]));
  if (code != absl::StatusCode::kOk) {
    Decoder error(absl::string_view(payload).substr(1));
    auto message = error.Str();
    return absl::Status(
        code, absl::StrCat("TCPStore ", op_name, ": ", message.ok() ? *message : "(no message)"));
  }
  return payload.substr(1);
}

absl::StatusOr<std::string> TCPStore::ReadResponse(absl::Time deadline) {
  const absl::Duration interval = options_.heartbeat.value_or(kDefaultHeartbeat);
  while (true) {
    // The server answers at once or beats while it holds the request: silence this long
    // means it is stopped, frozen or unreachable.
    const absl::Time silent_by = std::min(deadline, absl::Now() + interval);
    char header[kFrameLengthBytes];
    absl::Status received =
        RecvExact(socket_.fd.get(), socket_.cipher.get(), header, sizeof(header), silent_by);
    if (!received.ok() && received.code() == absl::StatusCode::kDeadlineExceeded &&
        silent_by < deadline) {
      return absl::UnavailableError(absl::StrCat(
          "server silent for ", absl::FormatDuration(interval),
          ", the heartbeat interval (stopped, frozen or unreachable; PLEXUS_HEARTBEAT sets it)"));
    }
    RETURN_IF_ERROR(received);
    const uint64_t length = FrameLength(header);
    if (length == 0) continue;  // A heartbeat.
    if (length > options_.max_frame_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("server sent ", OversizedFrame(length, options_.max_frame_bytes)));
    }
    std::string payload(length, '\0');
    RETURN_IF_ERROR(RecvExact(socket_.fd.get(), socket_.cipher.get(), payload.data(),
                              payload.size(), deadline));
    return payload;
  }
}

absl::Status TCPStore::Set(absl::string_view key, absl::string_view value) {
  return Call("set", Encoder().U8(OpByte(Opcode::kSet)).Str(key).Str(value)).status();
}

absl::StatusOr<std::string> TCPStore::Get(absl::string_view key) {
  const absl::Duration wait = timeout();
  ASSIGN_OR_RETURN(
      std::string reply,
      Call("get", Encoder().U8(OpByte(Opcode::kGet)).Str(key).I64(absl::ToInt64Milliseconds(wait)),
           wait));
  Decoder out(reply);
  return out.Str();
}

absl::StatusOr<int64_t> TCPStore::Add(absl::string_view key, int64_t delta) {
  ASSIGN_OR_RETURN(std::string reply,
                   Call("add", Encoder().U8(OpByte(Opcode::kAdd)).Str(key).I64(delta)));
  Decoder out(reply);
  return out.I64();
}

absl::StatusOr<std::string> TCPStore::CompareSet(absl::string_view key, absl::string_view expected,
                                                 absl::string_view desired) {
  ASSIGN_OR_RETURN(
      std::string reply,
      Call("compare_set",
           Encoder().U8(OpByte(Opcode::kCompareSet)).Str(key).Str(expected).Str(desired)));
  Decoder out(reply);
  return out.Str();
}

absl::Status TCPStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  return Call("wait",
              Encoder()
                  .U8(OpByte(Opcode::kWait))
                  .StrList(keys)
                  .I64(absl::ToInt64Milliseconds(timeout)),
              timeout)
      .status();
}

absl::StatusOr<bool> TCPStore::Check(absl::Span<const std::string> keys) {
  ASSIGN_OR_RETURN(std::string reply,
                   Call("check", Encoder().U8(OpByte(Opcode::kCheck)).StrList(keys)));
  Decoder out(reply);
  ASSIGN_OR_RETURN(uint8_t present, out.U8());
  return present != 0;
}

absl::StatusOr<bool> TCPStore::DeleteKey(absl::string_view key) {
  ASSIGN_OR_RETURN(std::string reply,
                   Call("delete_key", Encoder().U8(OpByte(Opcode::kDelete)).Str(key)));
  Decoder out(reply);
  ASSIGN_OR_RETURN(uint8_t existed, out.U8());
  return existed != 0;
}

absl::StatusOr<int64_t> TCPStore::NumKeys() {
  ASSIGN_OR_RETURN(std::string reply, Call("num_keys", Encoder().U8(OpByte(Opcode::kNumKeys))));
  Decoder out(reply);
  return out.I64();
}

absl::StatusOr<int64_t> TCPStore::ServerUnixNanos() {
  ASSIGN_OR_RETURN(std::string reply, Call("clock", Encoder().U8(OpByte(Opcode::kClock))));
  Decoder out(reply);
  return out.I64();
}

absl::StatusOr<std::vector<std::string>> TCPStore::MultiGet(absl::Span<const std::string> keys) {
  const absl::Duration wait = timeout();
  ASSIGN_OR_RETURN(std::string reply, Call("multi_get",
                                           Encoder()
                                               .U8(OpByte(Opcode::kMultiGet))
                                               .StrList(keys)
                                               .I64(absl::ToInt64Milliseconds(wait)),
                                           wait));
  Decoder out(reply);
  return out.StrList();
}

absl::Status TCPStore::MultiSet(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values) {
  RETURN_IF_ERROR(CheckMultiSetSizes(keys, values));
  return Call("multi_set", Encoder().U8(OpByte(Opcode::kMultiSet)).StrList(keys).StrList(values))
      .status();
}

absl::Status TCPStore::Append(absl::string_view key, absl::string_view value) {
  return Call("append", Encoder().U8(OpByte(Opcode::kAppend)).Str(key).Str(value)).status();
}

absl::Status TCPStore::WaitForClients(int count, absl::Duration timeout) {
  return Call("wait_for_workers",
              Encoder()
                  .U8(OpByte(Opcode::kWaitClients))
                  .I64(count)
                  .I64(absl::ToInt64Milliseconds(timeout)),
              timeout)
      .status();
}

}  // namespace plexus
