#include "backends/tcp/tcp_connect.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/server_connection.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/accept_guard.h"
#include "base/net/event_poller.h"

namespace plexus::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x54584C50;  // "PLXT"
constexpr uint16_t kHelloVersion = 1;
constexpr size_t kHelloBytes = 24;

uint64_t GroupHash(const std::string& name, int size) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across processes and builds.
  for (char c : absl::StrCat(name, "/", size)) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string Hello(const MeshOptions& options) {
  char bytes[kHelloBytes] = {};
  absl::little_endian::Store32(bytes, kHelloMagic);
  absl::little_endian::Store16(bytes + 4, kHelloVersion);
  absl::little_endian::Store32(bytes + 8, static_cast<uint32_t>(options.rank));
  absl::little_endian::Store32(bytes + 12, static_cast<uint32_t>(options.size));
  absl::little_endian::Store64(bytes + 16, GroupHash(options.group_name, options.size));
  return std::string(bytes, kHelloBytes);
}

// Reads a peer's hello and returns its rank after checking it belongs to this group.
absl::StatusOr<int> ReadHello(const Connection& connection, const MeshOptions& options,
                              absl::Time deadline) {
  char bytes[kHelloBytes];
  // The magic first: a stranger that sends a few bytes and waits is judged at once.
  RETURN_IF_ERROR(RecvExact(connection.fd.get(), connection.cipher.get(), bytes, 4, deadline));
  if (absl::little_endian::Load32(bytes) != kHelloMagic) {
    return absl::UnauthenticatedError(
        absl::string_view(bytes, 4) == auth::kHelloMagic
            ? "handshake: peer authenticates with a shared secret, this rank has none (set "
              "PLEXUS_SECRET on every rank)"
            : "handshake: bad magic (not a plexus tcp peer)");
  }
  RETURN_IF_ERROR(RecvExact(connection.fd.get(), connection.cipher.get(), bytes + 4,
                            kHelloBytes - 4, deadline));
  return ParseHello(absl::string_view(bytes, kHelloBytes), options);
}

constexpr absl::Duration kCancelPoll = absl::Milliseconds(200);
// How long an accepted connection may take to authenticate and introduce itself.
constexpr absl::Duration kHandshakeTimeout = absl::Seconds(5);

bool Cancelled(const MeshOptions& options) { return options.cancelled && options.cancelled(); }

absl::Status CancelledError(const MeshOptions& options) {
  return absl::AbortedError(absl::StrCat("rank ", options.rank, " of group '", options.group_name,
                                         "' stopped connecting: cancelled"));
}

// Store wait in slices, so cancellation is noticed.
absl::Status WaitForKey(const MeshOptions& options, const std::string& key, absl::Time deadline) {
  while (true) {
    if (Cancelled(options)) return CancelledError(options);
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const absl::Duration slice = options.cancelled ? std::min(left, kCancelPoll) : left;
    absl::Status status = options.store->Wait({key}, slice);
    if (status.ok() || status.code() != absl::StatusCode::kDeadlineExceeded ||
        absl::Now() >= deadline) {
      return status;
    }
  }
}

absl::StatusOr<ScopedFd> ConnectUnlessCancelled(const MeshOptions& options, const std::string& host,
                                                int port, absl::Time deadline) {
  while (true) {
    if (Cancelled(options)) return CancelledError(options);
    const absl::Time slice =
        options.cancelled ? std::min(deadline, absl::Now() + absl::Seconds(1)) : deadline;
    auto fd = ConnectTcpWithRetry(host, port, slice);
    if (fd.ok() || absl::Now() >= deadline) return fd;
  }
}

// The lower ranks' connections being admitted, all at once and without blocking, on the
// forming thread: TLS, the secret's exchange, then the peer's hello (auth::ServerConnection, as
// the store server and the elastic master admit theirs). A silent or slow one (a scanner, a
// flood, a peer of another job) holds up only itself, never the peers behind it.
class MeshAdmissions {
 public:
  struct Done {
    Connection connection;     // Valid when `peer` is.
    absl::StatusOr<int> peer;  // The lower rank it introduced itself as, or why it was refused.
    std::string from;
  };

  MeshAdmissions(const MeshOptions& options, EventPoller& poller)
      : options_(options), poller_(poller) {}
  ~MeshAdmissions() {
    for (const auto& [id, pending] : pending_) poller_.Forget(pending.stream->fd());
  }

  int running() const { return static_cast<int>(pending_.size()); }

  // Starts admitting `fd` (accepted, non-blocking); it must be through by `deadline`.
  void Start(ScopedFd fd, absl::Time deadline) {
    SetNoDelay(fd.get());
    const int raw_fd = fd.get();
    std::unique_ptr<auth::ServerConnection> stream = auth::ServerConnection::Accept(
        std::move(fd), options_.tls.get(), options_.secret, auth::Purpose::kData);
    if (stream == nullptr) return;  // Out of memory for its TLS session: dropped.
    const uint64_t id = next_id_++;
    poller_.Watch(raw_fd, id, EPOLLIN);
    pending_.emplace(id, Pending{std::move(stream), deadline});
  }

  // The poller says connection `id` is ready: takes its admission as far as it goes.
  void OnReady(uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    auth::ServerConnection& stream = *it->second.stream;
    auth::ServerAdmission& admission = stream.admission();
    if (!admission.secure()) {
      if (admission.AdvanceTls() == auth::ServerAdmission::Step::kRejected) {
        return Refuse(id, absl::UnauthenticatedError(admission.reason()));
      }
      if (!admission.secure()) return stream.UpdateWatch(poller_, id);
    }
    if (!stream.Flush()) return Refuse(id, absl::UnavailableError(stream.error()));
    // Nothing legitimate is longer than the secret's exchange or a hello.
    switch (stream.ReadAvailable(4096).end) {
      case auth::ServerConnection::ReadEnd::kDrained:
        break;
      case auth::ServerConnection::ReadEnd::kOverLimit:
        return Refuse(id, absl::UnauthenticatedError("sent more than a handshake"));
      case auth::ServerConnection::ReadEnd::kClosed:
        return Refuse(id, absl::UnavailableError("closed the connection during the handshake"));
      case auth::ServerConnection::ReadEnd::kFailed:
        return Refuse(id, absl::UnavailableError(stream.error()));
    }
    std::string& input = stream.input();
    if (admission.authenticating()) {
      std::string reply;
      const auth::ServerAdmission::Step step = admission.Feed(input, reply);
      if (!stream.Send(reply)) return Refuse(id, absl::UnavailableError(stream.error()));
      if (step == auth::ServerAdmission::Step::kRejected) {
        return Refuse(id, absl::UnauthenticatedError(admission.reason()));
      }
      if (step == auth::ServerAdmission::Step::kNeedMore) return stream.UpdateWatch(poller_, id);
    }
    // The magic first: a stranger that sends a few bytes and waits is judged at once.
    if (input.size() >= 4 && absl::little_endian::Load32(input.data()) != kHelloMagic) {
      return Refuse(id, BadMagic(absl::string_view(input).substr(0, 4)));
    }
    // Its hello, and then nothing until it has ours; the secret's last byte must be out too.
    if (input.size() < kHelloBytes || stream.has_output()) return stream.UpdateWatch(poller_, id);
    if (input.size() > kHelloBytes) {
      return Refuse(id, absl::UnauthenticatedError("handshake: sent more than its hello"));
    }
    absl::StatusOr<int> peer = ParseHello(input, options_);
    if (!peer.ok()) return Refuse(id, peer.status());
    input.clear();
    Finish(id, std::move(peer));
  }

  // Refuses the connections whose deadline has passed.
  void Expire(absl::Time now) {
    std::vector<uint64_t> late;
    for (const auto& [id, pending] : pending_) {
      if (pending.deadline <= now) late.push_back(id);
    }
    for (uint64_t id : late) {
      Refuse(id, absl::DeadlineExceededError(absl::StrCat(
                     "no handshake within ", absl::FormatDuration(kHandshakeTimeout))));
    }
  }
  absl::Time NextDeadline() const {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, pending] : pending_) next = std::min(next, pending.deadline);
    return next;
  }

  // Out of descriptors: closes the oldest connection still being admitted; false if none.
  bool CloseOldest() {
    if (pending_.empty()) return false;
    Refuse(pending_.begin()->first,
           absl::ResourceExhaustedError("closed to make room (out of file descriptors)"));
    return true;
  }

  // The admissions that ended since the last call.
  std::vector<Done> TakeDone() { return std::exchange(done_, {}); }

 private:
  struct Pending {
    std::unique_ptr<auth::ServerConnection> stream;
    absl::Time deadline;
  };

  static absl::Status BadMagic(absl::string_view magic) {
    return absl::UnauthenticatedError(
        magic == auth::kHelloMagic
            ? "handshake: peer authenticates with a shared secret, this rank has none (set "
              "PLEXUS_SECRET on every rank)"
            : "handshake: bad magic (not a plexus tcp peer)");
  }

  void Refuse(uint64_t id, absl::Status why) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    poller_.Forget(it->second.stream->fd());
    DiscardUnreadAndShutdown(it->second.stream->fd());
    done_.push_back({Connection{}, std::move(why), it->second.stream->address()});
    pending_.erase(it);
  }

  // Hands an admitted connection over, in blocking-style use from here.
  void Finish(uint64_t id, absl::StatusOr<int> peer) {
    auto it = pending_.find(id);
    poller_.Forget(it->second.stream->fd());
    const std::string from = it->second.stream->address();
    done_.push_back({it->second.stream->Release(), std::move(peer), from});
    pending_.erase(it);
  }

  const MeshOptions& options_;
  EventPoller& poller_;
  uint64_t next_id_ = 1;                 // The listener is watched under 0.
  std::map<uint64_t, Pending> pending_;  // By id: the oldest first.
  std::vector<Done> done_;
};

}  // namespace

absl::StatusOr<int> ParseHello(absl::string_view bytes, const MeshOptions& options) {
  if (bytes.size() != kHelloBytes) {
    return absl::UnauthenticatedError(
        absl::StrCat("handshake: ", bytes.size(), " bytes, not ", kHelloBytes));
  }
  if (absl::little_endian::Load32(bytes.data()) != kHelloMagic) {
    return absl::UnauthenticatedError("handshake: bad magic (not a plexus tcp peer)");
  }
  const uint16_t version = absl::little_endian::Load16(bytes.data() + 4);
  if (version != kHelloVersion) {
    return absl::UnauthenticatedError(
        absl::StrCat("handshake: peer speaks protocol ", version, ", this rank ", kHelloVersion));
  }
  const int rank = static_cast<int>(absl::little_endian::Load32(bytes.data() + 8));
  const int size = static_cast<int>(absl::little_endian::Load32(bytes.data() + 12));
  if (size != options.size || absl::little_endian::Load64(bytes.data() + 16) !=
                                  GroupHash(options.group_name, options.size)) {
    return absl::UnauthenticatedError(
        absl::StrCat("handshake: peer rank ", rank, " belongs to another group (size ", size,
                     ") than group '", options.group_name, "' of size ", options.size));
  }
  if (rank < 0 || rank >= options.size || rank == options.rank) {
    return absl::UnauthenticatedError(absl::StrCat("handshake: peer claims rank ", rank));
  }
  return rank;
}

absl::StatusOr<std::vector<Connection>> ConnectMesh(const MeshOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  std::vector<Connection> peers(options.size);
  if (options.size == 1) return peers;
  // A backlog well past the group's size: strangers queued there must not crowd out peers.
  ASSIGN_OR_RETURN(ScopedFd listener, ListenTcp(options.address, 0, std::max(options.size, 256)));
  ASSIGN_OR_RETURN(int port, LocalPort(listener.get()));
  const std::string here = HostPort(options.address, port);
  const std::string me = absl::StrCat("rank ", options.rank, " (listening at ", here, ")");
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("tcp: group '", options.group_name, "' rank ", options.rank,
                                       " listens at ", here));
  }
  RETURN_IF_ERROR(options.store->Set(absl::StrCat("addr/", options.rank), here));
  const std::string hello = Hello(options);
  // Higher ranks: connect and introduce ourselves, then read their hello back.
  for (int peer = options.rank + 1; peer < options.size; ++peer) {
    const std::string key = absl::StrCat("addr/", peer);
    RETURN_IF_ERROR(WaitForKey(options, key, deadline));
    ASSIGN_OR_RETURN(std::string text, options.store->Get(key));
    absl::StatusOr<std::pair<std::string, int>> host_port = ParseHostPort(text);
    if (!host_port.ok()) {
      return absl::DataLossError(
          absl::StrCat("rank ", peer, "'s address in the store: ", host_port.status().message()));
    }
    auto fd = ConnectUnlessCancelled(options, host_port->first, host_port->second, deadline);
    if (!fd.ok()) {
      return absl::UnavailableError(
          absl::StrCat(me, ": connecting to rank ", peer, " at ", text,
                       ", the address it advertised: ", fd.status().message()));
    }
    Connection connection{std::move(fd).value(), nullptr};
    const std::string them = absl::StrCat("rank ", peer, " at ", text);
    if (options.tls != nullptr) {
      auto session =
          options.tls->Secure(connection.fd.get(), auth::TlsContext::Role::kClient, them, deadline);
      if (!session.ok()) {
        return absl::Status(session.status().code(),
                            absl::StrCat(me, ": ", session.status().message()));
      }
      connection.cipher = std::move(session).value();
    }
    if (!options.secret.empty()) {
      absl::Status authenticated =
          auth::AuthenticateToServer(connection.fd.get(), options.secret, auth::Purpose::kData,
                                     them, deadline, connection.cipher.get());
      if (!authenticated.ok()) {
        return absl::Status(authenticated.code(), absl::StrCat(me, ": ", authenticated.message()));
      }
    }
    absl::Status sent = SendAll(connection.fd.get(), connection.cipher.get(), hello, deadline);
    absl::StatusOr<int> answered =
        sent.ok() ? ReadHello(connection, options, deadline) : absl::StatusOr<int>(sent);
    if (absl::IsUnavailable(answered.status())) {
      return absl::UnavailableError(absl::StrCat(
          me, ": ", text,
          " closed the connection during the handshake (it refused this rank: "
          "another group's, a different secret, or TLS on one side only; its log says which)"));
    }
    if (!answered.ok()) return answered.status();
    if (*answered != peer) {
      return absl::UnauthenticatedError(
          absl::StrCat(me, ": ", text, " answered as rank ", *answered, ", not ", peer));
    }
    peers[peer] = std::move(connection);
  }
  // Lower ranks: accept until each has introduced itself. Connections handshake concurrently
  // (at most kMostHandshakes at once; more wait in the backlog), and one that is not a peer of
  // this group (a scanner, a stale or foreign job, a wrong secret or certificate) is dropped, not
  // fatal: the real peers may still be on their way.
  constexpr int kMostHandshakes = 64;
  constexpr uint64_t kListenerTag = 0;
  std::string refused;  // The last connection dropped, for the timeout's message.
  const std::string server = absl::StrCat("tcp: ", me, " of group '", options.group_name, "'");
  RefusalLog refusals(server);
  ASSIGN_OR_RETURN(std::unique_ptr<EventPoller> poller, EventPoller::Create());
  poller->Watch(listener.get(), kListenerTag, EPOLLIN);
  bool listening = true;
  MeshAdmissions admissions(options, *poller);
  // Out of descriptors, the listener backs off instead of spinning; peers wait in its backlog.
  AcceptGuard guard(server, AcceptGuard::OnShortage::kPause);
  for (int accepted = 0; accepted < options.rank;) {
    if (Cancelled(options)) return CancelledError(options);
    for (MeshAdmissions::Done& done : admissions.TakeDone()) {
      absl::StatusOr<int> peer = std::move(done.peer);
      if (peer.ok() && (*peer > options.rank || peers[*peer].valid())) {
        peer = absl::UnauthenticatedError(absl::StrCat("unexpected connection as rank ", *peer));
      }
      if (!peer.ok()) {
        refused = absl::StrCat(done.from, ": ", peer.status().message());
        refusals.Refused(absl::StrCat("refused a connection from ", refused));
        continue;
      }
      RETURN_IF_ERROR(
          SendAll(done.connection.fd.get(), done.connection.cipher.get(), hello, deadline));
      peers[*peer] = std::move(done.connection);
      ++accepted;
    }
    if (accepted == options.rank) break;
    const absl::Time now = absl::Now();
    const bool paused = now < guard.paused_until();
    const bool room = admissions.running() < kMostHandshakes && !paused;
    if (room != listening) {  // Off the poller's events while full or paused.
      listening = room;
      poller->Change(listener.get(), kListenerTag, room ? uint32_t{EPOLLIN} : 0u);
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - now);
    if (left_ms <= 0) {
      std::string missing;
      for (int lower = 0; lower < options.rank; ++lower) {
        if (!peers[lower].valid()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", lower);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          me, " of group '", options.group_name, "': only ", accepted, " of ", options.rank,
          " lower ranks connected within ", absl::FormatDuration(options.timeout),
          "; missing: ", missing, " (can they reach ", here, "?)",
          refused.empty() ? std::string()
                          : absl::StrCat("; last refused: ", refused,
                                         refusals.count() > 1 ? absl::StrCat(" (", refusals.count(),
                                                                             " refused in all)")
                                                              : ""),
          guard.shortages() == 0
              ? std::string()
              : absl::StrCat("; this rank ran out of file descriptors (accept: ",
                             strerror(guard.last_shortage_errno()), ") ", guard.shortages(),
                             " time(s) while accepting: raise its limit (ulimit -n)")));
    }
    // Wakes for cancellation, the end of a pause and the earliest handshake's deadline too.
    absl::Time wake = std::min({deadline, now + kCancelPoll, admissions.NextDeadline()});
    if (paused) wake = std::min(wake, guard.paused_until());
    const int wait_ms = static_cast<int>(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(absl::Ceil(wake - now, absl::Milliseconds(1)))));
    bool listener_ready = false;
    RETURN_IF_ERROR(poller->Wait(wait_ms, [&](uint64_t tag, uint32_t) {
      if (tag == kListenerTag) {
        listener_ready = true;
      } else {
        admissions.OnReady(tag);
      }
    }));
    admissions.Expire(absl::Now());
    while (listener_ready && admissions.running() < kMostHandshakes) {
      ScopedFd fd(guard.Accept(listener.get(), [&] { return admissions.CloseOldest(); }));
      if (!fd.valid()) break;
      admissions.Start(std::move(fd), std::min(deadline, absl::Now() + kHandshakeTimeout));
    }
    guard.EndRound();
  }
  for (Connection& connection : peers) {
    if (connection.valid()) RETURN_IF_ERROR(SetNonBlocking(connection.fd.get(), true));
  }
  return peers;
}

}  // namespace plexus::tcp
