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
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/accept_guard.h"
#include "base/net/event_poller.h"
#include "base/net/frames.h"
#include "frontend/elastic/master_protocol.h"
#include "frontend/elastic/master_state.h"

namespace plexus::elastic {
namespace {

constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
// The listener's EventPoller tag; connections count from kFirstConnection.
constexpr uint64_t kListenerTag = 0;
constexpr int64_t kFirstConnection = 1;
constexpr size_t kMaxQueuedBytes = 64u << 20;  // A peer that reads nothing past this is dropped.

}  // namespace

// The socket loop: connections, frames, heartbeats; decisions are MasterState's.
class MasterNode::Server {
 public:
  Server(ScopedFd listener, std::unique_ptr<EventPoller> poller,
         std::unique_ptr<TCPStoreServer> store, absl::Duration heartbeat_timeout,
         std::string secret, std::shared_ptr<const auth::TlsContext> tls)
      : listener_(std::move(listener)),
        poller_(std::move(poller)),
        secret_(std::move(secret)),
        tls_(std::move(tls)),
        store_(std::move(store)),
        heartbeat_timeout_(heartbeat_timeout),
        state_(store_->port(), heartbeat_timeout) {
    poller_->Watch(listener_.get(), kListenerTag, EPOLLIN);
  }

  void Interrupt() {
    stopping_.store(true);
    poller_->Wake();
  }

  // Sleeps until a socket is ready or the next deadline (a hello, a heartbeat, a request's
  // timeout): an idle master does not wake.
  void Loop() {
    while (!stopping_.load()) {
      absl::Status waited = poller_->Wait(NextTimeoutMs(), [this](uint64_t tag, uint32_t events) {
        if (tag == kListenerTag) {
          AcceptAll();
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
      CheckTimers();
      Dispatch();
      UpdateWatches();
    }
    accept_guard_.ForgetAll();
    connections_.clear();
  }

 private:
  struct Connection {
    std::unique_ptr<auth::ServerConnection> stream;  // Socket, admission, buffers.
    int64_t peer = -1;                               // Until the hello.
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

  // Out of descriptors: closes the oldest connection that has not said hello; false if none.
  bool ShedOldestStranger() {
    int64_t oldest = -1;
    for (const auto& [id, c] : connections_) {
      if (c.peer < 0 && (oldest < 0 || id < oldest)) oldest = id;
    }
    if (oldest < 0) return false;
    Close(oldest, "closed to make room (out of file descriptors) before its hello");
    return true;
  }

  void AcceptAll() {
    while (true) {
      ScopedFd fd(accept_guard_.Accept(listener_.get(), [this] { return ShedOldestStranger(); }));
      if (!fd.valid()) break;
      SetNoDelay(fd.get());
      const int raw_fd = fd.get();
      Connection c;
      c.stream = auth::ServerConnection::Accept(std::move(fd), tls_.get(), secret_,
                                                auth::Purpose::kMaster);
      if (c.stream == nullptr) {  // Out of memory: the connection is dropped.
        accept_guard_.Forget(raw_fd);
        continue;
      }
      const int64_t id = next_connection_++;
      poller_->Watch(raw_fd, static_cast<uint64_t>(id), EPOLLIN);
      connections_.emplace(id, std::move(c));
    }
    accept_guard_.EndRound();
    const bool pause = absl::Now() < accept_guard_.paused_until();
    if (pause != listener_paused_) {  // Off the loop's events until then.
      listener_paused_ = pause;
      poller_->Change(listener_.get(), kListenerTag, pause ? 0u : uint32_t{EPOLLIN});
    }
  }

  // EPOLLOUT for the connections with output waiting, the listener back after a pause.
  void UpdateWatches() {
    for (auto& [id, c] : connections_) c.stream->UpdateWatch(*poller_, static_cast<uint64_t>(id));
    if (listener_paused_ && absl::Now() >= accept_guard_.paused_until()) {
      listener_paused_ = false;
      poller_->Change(listener_.get(), kListenerTag, EPOLLIN);
    }
  }

  // Until the earliest deadline CheckTimers or the state acts on, in whole milliseconds
  // rounded up (and one more, as the timers fire past their deadline).
  int NextTimeoutMs() const {
    absl::Time next = state_.NextExpiry();
    if (listener_paused_) next = std::min(next, accept_guard_.paused_until());
    for (const auto& [id, c] : connections_) {
      if (c.peer < 0) {
        next = std::min(next, c.stream->opened() + kHelloTimeout);
        continue;
      }
      next = std::min(
          {next, c.stream->last_heard() + heartbeat_timeout_, c.stream->NextBeat(BeatPeriod())});
    }
    if (next == absl::InfiniteFuture()) return -1;
    const absl::Duration left = next - absl::Now();
    if (left <= absl::ZeroDuration()) return 0;
    return static_cast<int>(std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))) + 1, 60'000));
  }

  void Close(int64_t id, const std::string& reason) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    const int64_t peer = it->second.peer;
    const std::string address = it->second.stream->address();
    const int fd = it->second.stream->fd();
    if (peer < 0) accept_guard_.Forget(fd);
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
      accept_guard_.Forget(c.stream->fd());
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
      if (c.peer < 0) {
        if (now - c.stream->opened() > kHelloTimeout) doomed.emplace_back(id, "no hello");
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

  const ScopedFd listener_;
  const std::unique_ptr<EventPoller> poller_;
  bool listener_paused_ = false;
  const std::string secret_;
  AcceptGuard accept_guard_{"elastic master"};
  RefusalLog refusals_{"elastic master"};  // Connections refused (TLS, secret, hello).
  const std::shared_ptr<const auth::TlsContext> tls_;
  const std::unique_ptr<TCPStoreServer> store_;
  const absl::Duration heartbeat_timeout_;
  // Beats five times per timeout on a quiet link, so one lost beat never expels a live peer.
  absl::Duration BeatPeriod() const { return heartbeat_timeout_ / 5; }
  std::atomic<bool> stopping_{false};
  MasterState state_;
  int64_t next_connection_ = kFirstConnection;
  std::map<int64_t, Connection> connections_;
  std::map<int64_t, Connection*> by_peer_;  // Node-based map: pointers stay valid.
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
