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
#include "base/auth/server_admission.h"
#include "base/auth/server_connection.h"
#include "base/auth/server_listener.h"
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

// Why a connection whose first four bytes are `magic`, not ours, is refused.
absl::Status BadMagic(absl::string_view magic) {
  return absl::UnauthenticatedError(
      magic == auth::kHelloMagic
          ? "handshake: peer authenticates with a shared secret, this rank has none (set "
            "PLEXUS_SECRET on every rank)"
          : "handshake: bad magic (not a plexus tcp peer)");
}

// Reads a peer's hello and returns its rank after checking it belongs to this group.
absl::StatusOr<int> ReadHello(const Connection& connection, const MeshOptions& options,
                              absl::Time deadline) {
  char bytes[kHelloBytes];
  // The magic first: a stranger that sends a few bytes and waits is judged at once.
  RETURN_IF_ERROR(RecvExact(connection.fd.get(), connection.cipher.get(), bytes, 4, deadline));
  if (absl::little_endian::Load32(bytes) != kHelloMagic) {
    return BadMagic(absl::string_view(bytes, 4));
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
// flood, a peer of another job) holds up only itself, never the peers behind it. The listener
// (auth::ServerListener) accepts them, times them out and sheds them.
class MeshAdmissions {
 public:
  struct Done {
    uint64_t id;
    Connection connection;     // Valid when `peer` is.
    absl::StatusOr<int> peer;  // The lower rank it introduced itself as, or why it was refused.
    std::string from;
  };

  MeshAdmissions(const MeshOptions& options, EventPoller& poller)
      : options_(options), poller_(poller) {}
  ~MeshAdmissions() {
    for (const auto& [id, stream] : pending_) poller_.Forget(stream->fd());
  }

  // Starts admitting a connection the listener accepted.
  void Start(uint64_t id, std::unique_ptr<auth::ServerConnection> stream) {
    poller_.Watch(stream->fd(), id, EPOLLIN);
    pending_.emplace(id, std::move(stream));
  }

  // The poller says connection `id` is ready: takes its admission as far as it goes.
  void OnReady(uint64_t id) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    auth::ServerConnection& stream = *it->second;
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

  // The admissions that ended since the last call.
  std::vector<Done> TakeDone() { return std::exchange(done_, {}); }

  // Ends connection `id`'s admission: refused, for `why`.
  void Refuse(uint64_t id, absl::Status why) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    poller_.Forget(it->second->fd());
    DiscardUnreadAndShutdown(it->second->fd());
    done_.push_back({id, Connection{}, std::move(why), it->second->address()});
    pending_.erase(it);
  }

 private:
  // Hands an admitted connection over, in blocking-style use from here.
  void Finish(uint64_t id, absl::StatusOr<int> peer) {
    auto it = pending_.find(id);
    poller_.Forget(it->second->fd());
    const std::string from = it->second->address();
    done_.push_back({id, it->second->Release(), std::move(peer), from});
    pending_.erase(it);
  }

  const MeshOptions& options_;
  EventPoller& poller_;
  std::map<uint64_t, std::unique_ptr<auth::ServerConnection>> pending_;
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

namespace {

// What every step of forming the mesh names: the options, where this rank listens, how it
// introduces itself, and by when all must be done.
struct MeshSide {
  const MeshOptions& options;
  std::string here;   // host:port this rank listens at.
  std::string me;     // "rank R (listening at here)", for messages.
  std::string hello;  // This rank's 24 bytes.
  absl::Time deadline;
};

// TLS (if configured) and the secret's proof (if any) on a fresh connection to `them`.
absl::Status SecureAsClient(const MeshSide& side, Connection& connection, const std::string& them) {
  const MeshOptions& options = side.options;
  auth::ClientAdmission admitted =
      auth::AdmitToServer(connection.fd.get(), options.tls.get(), options.secret,
                          auth::Purpose::kData, them, side.deadline);
  connection.cipher = std::move(admitted.cipher);
  if (admitted.status.ok()) return admitted.status;
  return absl::Status(admitted.status.code(),
                      absl::StrCat(side.me, ": ", admitted.status.message()));
}

// Connects to the higher rank `peer` at the address it advertised, introduces this rank and
// reads its hello back.
absl::StatusOr<Connection> ConnectToHigherRank(const MeshSide& side, int peer) {
  const MeshOptions& options = side.options;
  const std::string key = absl::StrCat("addr/", peer);
  RETURN_IF_ERROR(WaitForKey(options, key, side.deadline));
  ASSIGN_OR_RETURN(std::string text, options.store->Get(key));
  absl::StatusOr<std::pair<std::string, int>> host_port = ParseHostPort(text);
  if (!host_port.ok()) {
    return absl::DataLossError(
        absl::StrCat("rank ", peer, "'s address in the store: ", host_port.status().message()));
  }
  auto fd = ConnectUnlessCancelled(options, host_port->first, host_port->second, side.deadline);
  if (!fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat(side.me, ": connecting to rank ", peer, " at ", text,
                     ", the address it advertised: ", fd.status().message()));
  }
  Connection connection{std::move(fd).value(), nullptr};
  RETURN_IF_ERROR(SecureAsClient(side, connection, absl::StrCat("rank ", peer, " at ", text)));
  absl::Status sent =
      SendAll(connection.fd.get(), connection.cipher.get(), side.hello, side.deadline);
  absl::StatusOr<int> answered =
      sent.ok() ? ReadHello(connection, options, side.deadline) : absl::StatusOr<int>(sent);
  if (absl::IsUnavailable(answered.status())) {
    return absl::UnavailableError(absl::StrCat(
        side.me, ": ", text,
        " closed the connection during the handshake (it refused this rank: "
        "another group's, a different secret, or TLS on one side only; its log says which)"));
  }
  if (!answered.ok()) return answered.status();
  if (*answered != peer) {
    return absl::UnauthenticatedError(
        absl::StrCat(side.me, ": ", text, " answered as rank ", *answered, ", not ", peer));
  }
  return connection;
}

// The timeout's message: who is missing, the last connection refused, a descriptor shortage.
absl::Status LowerRanksMissing(const MeshSide& side, const std::vector<Connection>& peers,
                               int accepted, const std::string& last_refused,
                               uint64_t refused_count, const AcceptGuard& guard) {
  const MeshOptions& options = side.options;
  std::string missing;
  for (int lower = 0; lower < options.rank; ++lower) {
    if (!peers[lower].valid()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", lower);
  }
  std::string message = absl::StrCat(
      side.me, " of group '", options.group_name, "': only ", accepted, " of ", options.rank,
      " lower ranks connected within ", absl::FormatDuration(options.timeout),
      "; missing: ", missing, " (can they reach ", side.here, "?)");
  if (!last_refused.empty()) {
    absl::StrAppend(&message, "; last refused: ", last_refused);
    if (refused_count > 1) absl::StrAppend(&message, " (", refused_count, " refused in all)");
  }
  if (guard.shortages() > 0) {
    absl::StrAppend(&message, "; this rank ran out of file descriptors (accept: ",
                    strerror(guard.last_shortage_errno()), ") ", guard.shortages(),
                    " time(s) while accepting: raise its limit (ulimit -n)");
  }
  return absl::DeadlineExceededError(message);
}

// How the forming mesh listens: at most kMostHandshakes admissions at once (more wait in the
// backlog); out of descriptors it backs off instead of turning peers away.
auth::ServerListener::Options MeshListening(const MeshOptions& options, const std::string& server) {
  constexpr size_t kMostHandshakes = 64;
  auth::ServerListener::Options listening;
  listening.server = server;
  listening.on_shortage = AcceptGuard::OnShortage::kPause;
  listening.tls = options.tls.get();
  listening.secret = options.secret;
  listening.purpose = auth::Purpose::kData;
  listening.admission_timeout = kHandshakeTimeout;
  listening.most_strangers = kMostHandshakes;
  return listening;
}

// Accepts until each lower rank has introduced itself. Connections are admitted concurrently
// (MeshListening), and one that is not a peer of this group (a scanner, a stale or foreign
// job, a wrong secret or certificate) is dropped, not fatal: the real peers may still be on
// their way.
absl::Status AcceptLowerRanks(const MeshSide& side, ScopedFd listener,
                              std::vector<Connection>& peers) {
  const MeshOptions& options = side.options;
  const std::string server = absl::StrCat("tcp: ", side.me, " of group '", options.group_name, "'");
  ASSIGN_OR_RETURN(std::unique_ptr<EventPoller> poller, EventPoller::Create());
  MeshAdmissions admissions(options, *poller);
  auth::ServerListener accepting(
      std::move(listener), *poller, MeshListening(options, server),
      [&](uint64_t id, std::unique_ptr<auth::ServerConnection> stream) {
        admissions.Start(id, std::move(stream));
      },
      [&](uint64_t id, const std::string& reason) {
        admissions.Refuse(id, absl::UnavailableError(reason));
      });
  RefusalLog refusals(server);
  std::string refused;  // The last connection dropped, for the timeout's message.
  for (int accepted = 0;;) {
    if (Cancelled(options)) return CancelledError(options);
    for (MeshAdmissions::Done& done : admissions.TakeDone()) {
      accepting.Settle(done.id);
      absl::StatusOr<int> peer = std::move(done.peer);
      if (peer.ok() && (*peer > options.rank || peers[*peer].valid())) {
        peer = absl::UnauthenticatedError(absl::StrCat("unexpected connection as rank ", *peer));
      }
      if (!peer.ok()) {
        refused = absl::StrCat(done.from, ": ", peer.status().message());
        refusals.Refused(absl::StrCat("refused a connection from ", refused));
        continue;
      }
      RETURN_IF_ERROR(SendAll(done.connection.fd.get(), done.connection.cipher.get(), side.hello,
                              side.deadline));
      peers[*peer] = std::move(done.connection);
      ++accepted;
    }
    if (accepted == options.rank) return absl::OkStatus();
    accepting.Tick();
    const absl::Time now = absl::Now();
    if (now >= side.deadline) {
      return LowerRanksMissing(side, peers, accepted, refused, refusals.count(), accepting.guard());
    }
    // Wakes for cancellation and the listener's deadlines too.
    const absl::Time wake = std::min({side.deadline, now + kCancelPoll, accepting.NextDeadline()});
    bool listener_ready = false;
    RETURN_IF_ERROR(poller->Wait(wake, [&](uint64_t tag, uint32_t) {
      if (tag == auth::ServerListener::kTag) {
        listener_ready = true;
      } else {
        admissions.OnReady(tag);
      }
    }));
    if (listener_ready) accepting.AcceptAll();
  }
}

}  // namespace

absl::StatusOr<std::vector<Connection>> ConnectMesh(const MeshOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  std::vector<Connection> peers(options.size);
  if (options.size == 1) return peers;
  // A backlog well past the group's size: strangers queued there must not crowd out peers.
  ASSIGN_OR_RETURN(ScopedFd listener, ListenTcp(options.address, 0, std::max(options.size, 256)));
  ASSIGN_OR_RETURN(int port, LocalPort(listener.get()));
  const std::string here = HostPort(options.address, port);
  const MeshSide side{options, here,
                      absl::StrCat("rank ", options.rank, " (listening at ", here, ")"),
                      Hello(options), deadline};
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("tcp: group '", options.group_name, "' rank ", options.rank,
                                       " listens at ", here));
  }
  RETURN_IF_ERROR(options.store->Set(absl::StrCat("addr/", options.rank), here));
  for (int peer = options.rank + 1; peer < options.size; ++peer) {
    ASSIGN_OR_RETURN(peers[peer], ConnectToHigherRank(side, peer));
  }
  RETURN_IF_ERROR(AcceptLowerRanks(side, std::move(listener), peers));
  for (Connection& connection : peers) {
    if (connection.valid()) RETURN_IF_ERROR(SetNonBlocking(connection.fd.get(), true));
  }
  return peers;
}

}  // namespace plexus::tcp
