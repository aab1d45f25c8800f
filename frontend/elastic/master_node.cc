#include "frontend/elastic/master_node.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/server_connection.h"
#include "base/auth/server_listener.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/event_poller.h"
#include "base/net/frames.h"
#include "frontend/elastic/master_protocol.h"
#include "frontend/elastic/master_state.h"

namespace plexus::elastic {
namespace {

constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
constexpr size_t kMaxQueuedBytes = 64u << 20;  // A peer that reads nothing past this is dropped.

}  // namespace

// The socket loop: connections, frames, heartbeats; decisions are MasterState's.
class MasterNode::Server {
 public:
  Server(ScopedFd listener, std::unique_ptr<EventPoller> poller,
         std::unique_ptr<TCPStoreServer> store, absl::Duration heartbeat_timeout,
         std::string secret, std::shared_ptr<const auth::TlsContext> tls)
      : poller_(std::move(poller)),
        tls_(std::move(tls)),
        store_(std::move(store)),
        heartbeat_timeout_(heartbeat_timeout),
        state_(store_->port(), heartbeat_timeout) {
    auth::ServerListener::Options listening;
    listening.server = "elastic master";
    listening.tls = tls_.get();
    listening.secret = std::move(secret);
    listening.purpose = auth::Purpose::kMaster;
    listening.admission_timeout = kHelloTimeout;
    listener_ = std::make_unique<auth::ServerListener>(
        std::move(listener), *poller_, std::move(listening),
        [this](uint64_t id, std::unique_ptr<auth::ServerConnection> stream) {
          poller_->Watch(stream->fd(), id, EPOLLIN);
          Connection& c = connections_[static_cast<int64_t>(id)];
          c.id = id;
          c.stream = std::move(stream);
        },
        [this](uint64_t id, const std::string& reason) {
          Close(static_cast<int64_t>(id), reason);
        });
  }

  void Interrupt() {
    stopping_.store(true);
    poller_->Wake();
  }

  // Sleeps until a socket is ready or the next deadline (a hello, a heartbeat, a request's
  // timeout): an idle master does not wake.
  void Loop() {
    while (!stopping_.load()) {
      absl::Status waited = poller_->Wait(NextDeadline(), [this](uint64_t tag, uint32_t events) {
        if (tag == auth::ServerListener::kTag) {
          listener_->AcceptAll();
          return;
        }
        const int64_t id = static_cast<int64_t>(tag);
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) OnReadable(id);
        if (events & EPOLLOUT) OnWritable(id);
      });
      if (!waited.ok()) {
        Log(LogLevel::kError, absl::StrCat("elastic master: ", waited.message()));
        break;
      }
      listener_->Tick();
      CheckTimers();
      Dispatch();
      for (auto& [id, c] : connections_) {
        c.stream->UpdateWatch(*poller_, static_cast<uint64_t>(id));
      }
    }
    listener_->SettleAll();
    connections_.clear();
  }

 private:
  struct Connection {
    uint64_t id = 0;                                 // Its poller tag.
    std::unique_ptr<auth::ServerConnection> stream;  // Socket, admission, buffers.
    int64_t peer = -1;                               // Until the hello, and after a goodbye.
    bool left = false;                               // It said goodbye.
  };

  // Advances a connection's TLS handshake; false if it failed (and was closed).
  bool AdvanceTls(int64_t id, Connection& c) {
    auth::ServerAdmission& admission = c.stream->admission();
    if (admission.AdvanceTls() == auth::ServerAdmission::Step::kRejected) {
      refusals_.Refused(absl::StrCat("refused ", c.stream->address(), ": ", admission.reason()));
      Close(id, std::string(admission.reason()));  // A copy: Close destroys c.
      return false;
    }
    return true;
  }

  void OnWritable(int64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    if (!c.stream->admission().secure()) {
      if (AdvanceTls(id, c) && c.stream->admission().secure()) OnReadable(id);
      return;
    }
    Flush(id);
  }

  // The earliest deadline the listener, CheckTimers or the state acts on.
  absl::Time NextDeadline() const {
    absl::Time next = std::min(state_.NextExpiry(), listener_->NextDeadline());
    for (const auto& [id, c] : connections_) {
      if (c.peer < 0) continue;
      next = std::min(
          {next, c.stream->last_heard() + heartbeat_timeout_, c.stream->NextBeat(BeatPeriod())});
    }
    return next;
  }

  void Close(int64_t id, const std::string& reason) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    const int64_t peer = it->second.peer;
    const std::string address = it->second.stream->address();
    const int fd = it->second.stream->fd();
    if (peer < 0) listener_->Settle(static_cast<uint64_t>(id));
    poller_->Forget(fd);
    DiscardUnreadAndShutdown(fd);
    connections_.erase(it);
    if (peer < 0) {  // Refusals are logged (throttled) where they are decided.
      Log(LogLevel::kDebug, absl::StrCat("elastic master: closed ", address, ": ", reason));
      return;
    }
    by_peer_.erase(peer);
    const std::string who = state_.Describe(peer);
    Log(LogLevel::kInfo, absl::StrCat("elastic master: dropped ", who, ": ", reason));
    state_.Drop(peer, absl::StrCat(who, " was lost: ", reason));
  }

  void OnReadable(int64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    auth::ServerAdmission& admission = c.stream->admission();
    if (!admission.secure() && (!AdvanceTls(id, c) || !admission.secure())) return;
    // Before authentication only the exchange's few bytes are legitimate.
    const size_t limit = admission.authenticating() ? 4096 : std::string::npos;
    const auth::ServerConnection::ReadOutcome read = c.stream->ReadAvailable(limit);
    switch (read.end) {
      case auth::ServerConnection::ReadEnd::kDrained:
        break;
      case auth::ServerConnection::ReadEnd::kOverLimit:
        return Close(id, "sent more than an authentication before authenticating");
      case auth::ServerConnection::ReadEnd::kClosed:
        return Close(id, "connection closed");
      case auth::ServerConnection::ReadEnd::kFailed:
        return Close(id, absl::StrCat("connection error: ", c.stream->error()));
    }
    std::string& rx = c.stream->input();
    if (admission.authenticating()) {
      std::string reply;
      const auth::ServerAdmission::Step step = admission.Feed(rx, reply);
      Send(id, reply);
      if (connections_.find(id) == connections_.end()) return;
      if (step == auth::ServerAdmission::Step::kRejected) {
        refusals_.Refused(absl::StrCat("refused ", c.stream->address(), ": ", admission.reason()));
        return Close(id, absl::StrCat("authentication: ", admission.reason()));
      }
      if (step == auth::ServerAdmission::Step::kNeedMore) return;
    }
    size_t at = 0;
    while (true) {
      const FrameAtFront frame = PeekFrame(absl::string_view(rx).substr(at), kMaxFrameBytes);
      if (frame.state == FrameAtFront::State::kPartial) break;
      if (frame.state == FrameAtFront::State::kOversized) {
        return Close(id, OversizedFrame(frame.length, kMaxFrameBytes));
      }
      auto message = DecodePayload(frame.payload);
      at += frame.size();
      if (!message.ok()) return Close(id, std::string(message.status().message()));
      if (absl::Status status = OnMessage(c, *message); !status.ok()) {
        return Close(id, absl::StrCat("protocol error: ", status.message()));
      }
      if (connections_.find(id) == connections_.end()) return;  // Left.
    }
    rx.erase(0, at);
  }

  absl::Status OnMessage(Connection& c, const Message& message) {
    if (c.peer < 0) {
      if (message.type != MessageType::kHello || message.ints.size() != 3 ||
          message.ints[0] != kMagic) {
        return absl::UnauthenticatedError("not an elastic peer (bad hello)");
      }
      if (message.ints[1] != kProtocolVersion) {
        return absl::UnauthenticatedError(absl::StrCat("peer speaks protocol ", message.ints[1],
                                                       ", this master ", kProtocolVersion));
      }
      listener_->Settle(c.id);
      c.peer = state_.Join(message.ints[2], c.stream->address());
      by_peer_[c.peer] = &c;
      Log(LogLevel::kInfo, absl::StrCat("elastic master: ", state_.Describe(c.peer), " joined"));
      return absl::OkStatus();
    }
    if (message.type == MessageType::kLeave) {
      // Graceful: the peer's goodbye; it closes its end.
      const int64_t peer = c.peer;
      by_peer_.erase(peer);
      c.peer = -1;
      c.left = true;
      c.stream->DiscardOutput();
      state_.Drop(peer, absl::StrCat(state_.Describe(peer), " left"));
      return absl::OkStatus();
    }
    return state_.Handle(c.peer, message);
  }

  // Queues `bytes` and sends what the socket takes; closes the connection if a send fails.
  void Send(int64_t id, absl::string_view bytes) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    auth::ServerConnection& stream = *it->second.stream;
    if (!stream.Send(bytes)) Close(id, absl::StrCat("send failed: ", stream.error()));
  }
  void Flush(int64_t id) { Send(id, {}); }

  void CheckTimers() {
    const absl::Time now = absl::Now();
    std::vector<std::pair<int64_t, std::string>> doomed;
    for (auto& [id, c] : connections_) {
      if (c.peer < 0) {  // Strangers are the listener's to time out.
        if (c.left) doomed.emplace_back(id, "it left");
        continue;
      }
      if (now - c.stream->last_heard() > heartbeat_timeout_) {
        doomed.emplace_back(
            id, absl::StrCat("silent for ", absl::FormatDuration(now - c.stream->last_heard()),
                             " (frozen, or its network is down)"));
        continue;
      }
      if (c.stream->BeatDue(now, BeatPeriod())) {
        c.stream->Send(EncodeFrame(Message{MessageType::kHeartbeat, {}, ""}));
      }
    }
    for (const auto& [id, reason] : doomed) Close(id, reason);
    state_.Expire(now);
  }

  void Dispatch() {
    // Dropping a peer can queue more messages (to survivors): loop until quiet.
    while (true) {
      std::vector<MasterState::Outgoing> out = state_.TakeOutgoing();
      if (out.empty()) break;
      std::vector<int64_t> touched;
      for (MasterState::Outgoing& o : out) {
        auto it = by_peer_.find(o.peer);
        if (it == by_peer_.end()) continue;
        it->second->stream->Send(EncodeFrame(o.message));
      }
      std::vector<std::pair<int64_t, std::string>> doomed;
      for (auto& [id, c] : connections_) {
        if (c.stream->queued_bytes() > kMaxQueuedBytes)
          doomed.emplace_back(id, "not reading its messages");
      }
      for (const auto& [id, reason] : doomed) Close(id, reason);
      for (auto& [id, c] : connections_) touched.push_back(id);
      for (int64_t id : touched) Flush(id);
    }
  }

  const std::unique_ptr<EventPoller> poller_;
  RefusalLog refusals_{"elastic master"};  // Connections refused (TLS, secret, hello).
  const std::shared_ptr<const auth::TlsContext> tls_;
  const std::unique_ptr<TCPStoreServer> store_;
  const absl::Duration heartbeat_timeout_;
  // Beats five times per timeout on a quiet link, so one lost beat never expels a live peer.
  absl::Duration BeatPeriod() const { return heartbeat_timeout_ / 5; }
  std::atomic<bool> stopping_{false};
  MasterState state_;
  std::map<int64_t, Connection> connections_;
  std::map<int64_t, Connection*> by_peer_;  // Node-based map: pointers stay valid.
  // Accepts, admits, sheds; connections are strangers until their hello.
  std::unique_ptr<auth::ServerListener> listener_;
};

absl::StatusOr<std::unique_ptr<MasterNode>> MasterNode::Create(MasterNodeOptions options) {
  ASSIGN_OR_RETURN(auto host_port, ParseHostPort(options.listen_address));
  if (options.heartbeat_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("heartbeat timeout must be at least 100 ms");
  }
  ASSIGN_OR_RETURN(ScopedFd listener, ListenTcp(host_port.first, host_port.second));
  ASSIGN_OR_RETURN(int port, LocalPort(listener.get()));
  ASSIGN_OR_RETURN(options.secret, auth::ResolveSecret(options.secret));
  ASSIGN_OR_RETURN(std::shared_ptr<const auth::TlsContext> tls,
                   auth::TlsContext::Resolve(options.tls));
  TCPStoreServerOptions store_options;
  store_options.host = host_port.first;
  store_options.secret = *options.secret;
  store_options.tls = tls;
  ASSIGN_OR_RETURN(std::unique_ptr<TCPStoreServer> store, TCPStoreServer::Start(store_options));
  ASSIGN_OR_RETURN(std::unique_ptr<EventPoller> poller, EventPoller::Create());
  auto server = std::make_unique<Server>(std::move(listener), std::move(poller), std::move(store),
                                         options.heartbeat_timeout, *options.secret, tls);
  return std::unique_ptr<MasterNode>(new MasterNode(host_port.first, port, std::move(server)));
}

MasterNode::MasterNode(std::string host, int port, std::unique_ptr<Server> server)
    : host_(std::move(host)), port_(port), server_(std::move(server)) {}

MasterNode::~MasterNode() {
  Interrupt();
  if (thread_.joinable()) thread_.join();
}

absl::Status MasterNode::Run() {
  MutexLock lock(mu_);
  if (started_) return absl::FailedPreconditionError("the master node is already running");
  started_ = true;
  thread_ = std::thread([this] {
    server_->Loop();
    MutexLock lock(mu_);
    stopped_ = true;
    stopped_cv_.notify_all();
  });
  return absl::OkStatus();
}

void MasterNode::Interrupt() { server_->Interrupt(); }

absl::Status MasterNode::AwaitTermination(absl::Duration timeout) {
  UniqueLock lock(mu_);
  if (!started_) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout;
  while (!stopped_) {
    if (timeout == absl::InfiniteDuration()) {
      stopped_cv_.wait_for(lock, std::chrono::seconds(1));
    } else {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("the master node is still running");
      }
      stopped_cv_.wait_for(lock, absl::ToChronoNanoseconds(std::min(left, absl::Seconds(1))));
    }
  }
  return absl::OkStatus();
}

}  // namespace plexus::elastic
