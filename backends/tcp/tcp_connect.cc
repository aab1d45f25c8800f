#include "backends/tcp/tcp_connect.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/auth/mutual_auth.h"
#include "base/core/logging.h"
#include "base/core/mutex.h"
#include "base/core/status_macros.h"
#include "base/net/accept_guard.h"

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

// Accepted connections handshaking at once, each on a thread of its own: a silent or slow one
// (a scanner, a flood, a peer of another job) holds up only itself, never the peers behind it.
class Handshakes {
 public:
  struct Done {
    Connection connection;
    absl::StatusOr<int> peer;  // The lower rank it introduced itself as, or why it was refused.
    std::string from;
  };

  explicit Handshakes(const MeshOptions& options) : options_(options) {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  }
  // Ends the handshakes still running (their sockets are shut down) and joins every thread.
  ~Handshakes() {
    std::map<uint64_t, std::thread> threads;
    {
      MutexLock lock(mu_);
      for (const auto& [id, fd] : running_) shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);  // Their handshakes never touch threads_.
    }
    for (auto& [id, thread] : threads) thread.join();
    for (int fd : wake_) {
      if (fd >= 0) close(fd);
    }
  }

  // Readable when a handshake finished (poll it beside the listener).
  int wake_fd() const { return wake_[0]; }
  int running() {
    MutexLock lock(mu_);
    return static_cast<int>(running_.size());
  }

  void Start(Connection connection, absl::Time deadline) {
    const uint64_t id = next_id_++;
    MutexLock lock(mu_);
    running_[id] = connection.fd.get();
    threads_[id] = std::thread([this, id, deadline, connection = std::move(connection)]() mutable {
      const std::string from = PeerAddress(connection.fd.get());
      absl::StatusOr<int> peer = Handshake(connection, from, deadline);
      MutexLock lock(mu_);
      running_.erase(id);
      shut_down_.erase(id);
      done_.push_back({id, Done{std::move(connection), std::move(peer), from}});
      if (wake_[1] >= 0) {
        [[maybe_unused]] ssize_t n = write(wake_[1], "x", 1);
      }
    });
  }

  // Shuts down the oldest handshake not shut down yet, so that its descriptor is freed when its
  // thread ends; false if every one already was (or none runs).
  bool ShutDownOldest() {
    MutexLock lock(mu_);
    for (const auto& [id, fd] : running_) {
      if (shut_down_.insert(id).second) {
        shutdown(fd, SHUT_RDWR);
        return true;
      }
    }
    return false;
  }

  // The handshakes that finished since the last call (their threads joined).
  std::vector<Done> TakeDone() {
    std::vector<std::pair<uint64_t, Done>> done;
    {
      MutexLock lock(mu_);
      done.swap(done_);
      char sink[64];
      while (wake_[0] >= 0 && read(wake_[0], sink, sizeof(sink)) > 0) {
      }
    }
    std::vector<Done> out;
    for (auto& [id, result] : done) {
      std::thread thread;
      {
        MutexLock lock(mu_);
        thread = std::move(threads_[id]);
        threads_.erase(id);
      }
      thread.join();
      out.push_back(std::move(result));
    }
    return out;
  }

 private:
  // TLS, then the secret, then the peer's hello, by `deadline`: the rank it claims.
  absl::StatusOr<int> Handshake(Connection& connection, const std::string& from,
                                absl::Time deadline) {
    const int fd = connection.fd.get();
    RETURN_IF_ERROR(SetNonBlocking(fd, false));
    SetNoDelay(fd);
    if (options_.tls != nullptr) {
      ASSIGN_OR_RETURN(connection.cipher,
                       options_.tls->Secure(fd, auth::TlsContext::Role::kServer, from, deadline));
    }
    if (!options_.secret.empty()) {
      RETURN_IF_ERROR(auth::AuthenticateClient(fd, options_.secret, auth::Purpose::kData, from,
                                               deadline, connection.cipher.get()));
    }
    return ReadHello(connection, options_, deadline);
  }

  const MeshOptions& options_;
  int wake_[2];
  uint64_t next_id_ = 0;  // Start() is called from one thread.
  Mutex mu_;
  std::map<uint64_t, int> running_ ABSL_GUARDED_BY(mu_);  // Handshake -> its socket.
  // Running handshakes shut down to free descriptors.
  std::set<uint64_t> shut_down_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, Done>> done_ ABSL_GUARDED_BY(mu_);
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
  std::string refused;  // The last connection dropped, for the timeout's message.
  int refusals = 0;
  Handshakes handshakes(options);
  // Out of descriptors, the listener backs off instead of spinning; peers wait in its backlog.
  const std::string server = absl::StrCat("tcp: ", me, " of group '", options.group_name, "'");
  AcceptGuard guard(server, AcceptGuard::OnShortage::kPause);
  for (int accepted = 0; accepted < options.rank;) {
    if (Cancelled(options)) return CancelledError(options);
    for (Handshakes::Done& done : handshakes.TakeDone()) {
      absl::StatusOr<int> peer = std::move(done.peer);
      if (peer.ok() && (*peer > options.rank || peers[*peer].valid())) {
        peer = absl::UnauthenticatedError(absl::StrCat("unexpected connection as rank ", *peer));
      }
      if (!peer.ok()) {
        refused = absl::StrCat(done.from, ": ", peer.status().message());
        // The first ten, then every hundredth: a flood must not flood the log.
        if (++refusals <= 10 || refusals % 100 == 0) {
          Log(LogLevel::kWarning,
              absl::StrCat(server, " refused a connection from ", refused,
                           refusals >= 10 ? absl::StrCat(" (", refusals, " refused so far)") : ""));
        }
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
    const bool room = handshakes.running() < kMostHandshakes && !paused;
    pollfd fds[2] = {{listener.get(), static_cast<short>(room ? POLLIN : 0), 0},
                     {handshakes.wake_fd(), POLLIN, 0}};
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - now);
    int64_t wait_ms = std::min<int64_t>(left_ms, 200);
    if (paused) {  // Look at the listener again when the pause ends.
      wait_ms = std::min(wait_ms, absl::ToInt64Milliseconds(guard.paused_until() - now) + 1);
    }
    if (left_ms <= 0 || poll(fds, 2, static_cast<int>(wait_ms)) < 0) {
      if (left_ms > 0 && errno == EINTR) continue;
      if (left_ms > 0) return absl::InternalError(absl::StrCat("poll: ", strerror(errno)));
      std::string missing;
      for (int lower = 0; lower < options.rank; ++lower) {
        if (!peers[lower].valid()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", lower);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          me, " of group '", options.group_name, "': only ", accepted, " of ", options.rank,
          " lower ranks connected within ", absl::FormatDuration(options.timeout),
          "; missing: ", missing, " (can they reach ", here, "?)",
          refused.empty()
              ? std::string()
              : absl::StrCat("; last refused: ", refused,
                             refusals > 1 ? absl::StrCat(" (", refusals, " refused in all)") : ""),
          guard.shortages() == 0
              ? std::string()
              : absl::StrCat("; this rank ran out of file descriptors (accept: ",
                             strerror(guard.last_shortage_errno()), ") ", guard.shortages(),
                             " time(s) while accepting: raise its limit (ulimit -n)")));
    }
    while (room && (fds[0].revents & POLLIN) && handshakes.running() < kMostHandshakes) {
      Connection connection{
          ScopedFd(guard.Accept(listener.get(), [&] { return handshakes.ShutDownOldest(); })),
          nullptr};
      if (!connection.valid()) break;
      handshakes.Start(std::move(connection), std::min(deadline, absl::Now() + kHandshakeTimeout));
    }
    guard.EndRound();
  }
  for (Connection& connection : peers) {
    if (connection.valid()) RETURN_IF_ERROR(SetNonBlocking(connection.fd.get(), true));
  }
  return peers;
}

}  // namespace plexus::tcp
