#include "base/store/torch_store_client.h"

#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

constexpr uint32_t kTorch2ValidationMagic = 0x3C85F7CE;
constexpr uint8_t kTorch2Validate = 0;
// How long a server gets to answer the protocol probe before the other generation is tried.
constexpr absl::Duration kProbeTimeout = absl::Seconds(3);
// Values longer than this from the server close the connection (rendezvous values are small).
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 30;

void PutU64(std::string& out, uint64_t value) {
  char bytes[8];
  absl::little_endian::Store64(bytes, value);
  out.append(bytes, 8);
}

void PutString(std::string& out, absl::string_view text) {
  PutU64(out, text.size());
  out.append(text.data(), text.size());
}

std::string Prefixed(absl::string_view key) { return absl::StrCat("/", key); }

absl::StatusOr<ScopedFd> Open(const std::string& host, int port,
                              TorchStoreClient::Protocol protocol, absl::Time deadline) {
  ASSIGN_OR_RETURN(ScopedFd fd, ConnectTcpWithRetry(host, port, deadline));
  if (protocol == TorchStoreClient::Protocol::kTorch2) {
    std::string hello(1, static_cast<char>(kTorch2Validate));
    char magic[4];
    absl::little_endian::Store32(magic, kTorch2ValidationMagic);
    hello.append(magic, 4);
    RETURN_IF_ERROR(SendAll(fd.get(), hello, deadline));
  }
  return fd;
}

// Asks for the number of keys: a server of the generation `protocol` answers 8 bytes; torch 2.x
// closes a connection whose first query is not VALIDATE.
absl::Status Probe(int fd, TorchStoreClient::Protocol protocol, absl::Time deadline) {
  const uint8_t code = protocol == TorchStoreClient::Protocol::kTorch1 ? 6 : 7;
  RETURN_IF_ERROR(SendAll(fd, std::string(1, static_cast<char>(code)), deadline));
  char reply[8];
  return RecvExact(fd, reply, sizeof(reply), deadline);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchStoreClient>> TorchStoreClient::Connect(
    const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string failures;
  for (Protocol protocol : {Protocol::kTorch1, Protocol::kTorch2}) {
    ASSIGN_OR_RETURN(ScopedFd fd, Open(host, port, protocol, deadline));
    absl::Status probed =
        Probe(fd.get(), protocol, std::min(deadline, absl::Now() + kProbeTimeout));
    if (probed.ok()) {
      return std::unique_ptr<TorchStoreClient>(
          new TorchStoreClient(host, port, timeout, protocol, std::move(fd)));
    }
    absl::StrAppend(&failures, protocol == Protocol::kTorch1 ? " torch 1.x: " : "; torch 2.x: ",
                    probed.message());
  }
  return absl::UnavailableError(absl::StrCat("torch TCPStore client: the server at ",
                                             HostPort(host, port),
                                             " answered neither torch 1.x's nor torch 2.x's "
                                             "TCPStore protocol (",
                                             failures, ")"));
}

TorchStoreClient::TorchStoreClient(std::string host, int port, absl::Duration timeout,
                                   Protocol protocol, ScopedFd socket)
    : Store(timeout),
      host_(std::move(host)),
      port_(port),
      protocol_(protocol),
      socket_(std::move(socket)) {}

uint8_t TorchStoreClient::Code(Query query) const {
  // torch 1.x: SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS, WATCH_KEY, DELETE_KEY.
  // torch 2.x put VALIDATE first and dropped WATCH_KEY.
  const int shift = protocol_ == Protocol::kTorch2 ? 1 : 0;
  switch (query) {
    case Query::kSet:
      return 0 + shift;
    case Query::kCompareSet:
      return 1 + shift;
    case Query::kGet:
      return 2 + shift;
    case Query::kAdd:
      return 3 + shift;
    case Query::kCheck:
      return 4 + shift;
    case Query::kWait:
      return 5 + shift;
    case Query::kNumKeys:
      return 6 + shift;
    case Query::kDeleteKey:
      return 8;
  }
  return 0;
}

absl::StatusOr<std::string> TorchStoreClient::Call(absl::string_view what,
                                                   const std::string& request, int reply_bytes,
                                                   absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  auto fail = [&](const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    socket_.Reset();
    return absl::Status(status.code(), absl::StrCat("torch TCPStore at ", HostPort(host_, port_),
                                                    ": ", what, ": ", status.message()));
  };
  if (!socket_.valid()) {
    auto reopened = Open(host_, port_, protocol_, absl::Now() + timeout());
    if (!reopened.ok()) return fail(reopened.status());
    socket_ = std::move(reopened).value();
  }
  if (absl::Status sent = SendAll(socket_.get(), request, deadline); !sent.ok()) {
    return fail(sent);
  }
  uint64_t size = static_cast<uint64_t>(reply_bytes);
  if (reply_bytes < 0) {
    char length[8];
    if (absl::Status got = RecvExact(socket_.get(), length, 8, deadline); !got.ok()) {
      return fail(got);
    }
    size = absl::little_endian::Load64(length);
    if (size > kMaxValueBytes) {
      return fail(absl::DataLossError(absl::StrCat("a ", size, "-byte value is over the cap")));
    }
  }
  std::string reply(size, '\0');
  if (absl::Status got = RecvExact(socket_.get(), reply.data(), size, deadline); !got.ok()) {
    return fail(got);
  }
  return reply;
}

absl::Status TorchStoreClient::Set(absl::string_view key, absl::string_view value) {
  std::string request(1, static_cast<char>(Code(Query::kSet)));
  PutString(request, Prefixed(key));
  PutString(request, value);
  MutexLock lock(mu_);
  // SET has no reply.
  return Call("set", request, 0, timeout()).status();
}

absl::StatusOr<std::string> TorchStoreClient::GetLocked(absl::string_view key) {
  std::string request(1, static_cast<char>(Code(Query::kGet)));
  PutString(request, Prefixed(key));
  return Call(absl::StrCat("get '", key, "'"), request, -1, timeout());
}

absl::StatusOr<std::string> TorchStoreClient::Get(absl::string_view key) {
  RETURN_IF_ERROR(Wait({std::string(key)}, timeout()));
  MutexLock lock(mu_);
  return GetLocked(key);
}

absl::StatusOr<int64_t> TorchStoreClient::Add(absl::string_view key, int64_t delta) {
  std::string request(1, static_cast<char>(Code(Query::kAdd)));
  PutString(request, Prefixed(key));
  PutU64(request, static_cast<uint64_t>(delta));
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(std::string reply, Call("add", request, 8, timeout()));
  return static_cast<int64_t>(absl::little_endian::Load64(reply.data()));
}

absl::StatusOr<std::string> TorchStoreClient::CompareSet(absl::string_view key,
                                                         absl::string_view expected,
                                                         absl::string_view desired) {
  std::string request(1, static_cast<char>(Code(Query::kCompareSet)));
  PutString(request, Prefixed(key));
  PutString(request, expected);
  PutString(request, desired);
  MutexLock lock(mu_);
  return Call("compare_set", request, -1, timeout());
}

absl::Status TorchStoreClient::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  std::string request(1, static_cast<char>(Code(Query::kWait)));
  PutU64(request, keys.size());
  for (const std::string& key : keys) PutString(request, Prefixed(key));
  MutexLock lock(mu_);
  // The server answers only once every key exists; our deadline is the wait's own.
  absl::StatusOr<std::string> reply = Call("wait", request, 1, timeout);
  if (absl::IsDeadlineExceeded(reply.status())) return WaitTimeoutError(timeout, keys);
  RETURN_IF_ERROR(reply.status());
  if ((*reply)[0] != 0) {
    return absl::AbortedError(absl::StrCat("torch TCPStore at ", HostPort(host_, port_),
                                           ": the wait was cancelled by the server"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TorchStoreClient::Check(absl::Span<const std::string> keys) {
  std::string request(1, static_cast<char>(Code(Query::kCheck)));
  PutU64(request, keys.size());
  for (const std::string& key : keys) PutString(request, Prefixed(key));
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(std::string reply, Call("check", request, 1, timeout()));
  return reply[0] == 0;  // READY
}

absl::StatusOr<bool> TorchStoreClient::DeleteKey(absl::string_view key) {
  std::string request(1, static_cast<char>(Code(Query::kDeleteKey)));
  PutString(request, Prefixed(key));
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(std::string reply, Call("delete_key", request, 8, timeout()));
  return absl::little_endian::Load64(reply.data()) > 0;
}

absl::StatusOr<int64_t> TorchStoreClient::NumKeys() {
  std::string request(1, static_cast<char>(Code(Query::kNumKeys)));
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(std::string reply, Call("num_keys", request, 8, timeout()));
  return static_cast<int64_t>(absl::little_endian::Load64(reply.data()));
}

absl::StatusOr<std::vector<std::string>> TorchStoreClient::MultiGet(
    absl::Span<const std::string> keys) {
  RETURN_IF_ERROR(Wait(keys, timeout()));
  MutexLock lock(mu_);
  std::vector<std::string> values;
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(std::string value, GetLocked(key));
    values.push_back(std::move(value));
  }
  return values;
}

absl::Status TorchStoreClient::MultiSet(absl::Span<const std::string> keys,
                                        absl::Span<const std::string> values) {
  return MultiSetEach(*this, keys, values);
}

absl::Status TorchStoreClient::Append(absl::string_view key, absl::string_view value) {
  return AppendByCompareSet(*this, key, value);
}

}  // namespace plexus
