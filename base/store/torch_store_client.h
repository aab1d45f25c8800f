// TorchStoreClient: a Store that is a client of torch.distributed's own TCPStore server, such
// as the one torchrun's agent serves on MASTER_PORT (workers see
// TORCHELASTIC_USE_AGENT_STORE=True). Speaks c10d's wire protocol, in both generations: torch
// 1.x (no handshake) and torch 2.x (a VALIDATE message first, query codes shifted by one);
// which one the server speaks is found out when connecting.
//
// Keys are sent with the "/" prefix torch's clients add, so torch code sees the same keys.
// Only the queries both generations have are used: MultiGet waits and then gets key by key,
// MultiSet sets key by key (not atomic) and Append is a compare-and-set loop. A Wait that times
// out leaves torch's server holding the request, so the connection is dropped and the next call
// reconnects. Thread-safe; calls are serialised on one connection.
#ifndef PLEXUS_BASE_STORE_TORCH_STORE_CLIENT_H_
#define PLEXUS_BASE_STORE_TORCH_STORE_CLIENT_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/core/mutex.h"
#include "base/net/socket_util.h"
#include "base/store/store.h"

namespace plexus {

class TorchStoreClient : public Store {
 public:
  enum class Protocol { kTorch1, kTorch2 };

  // Connects (retrying until `timeout`) and detects the protocol.
  static absl::StatusOr<std::unique_ptr<TorchStoreClient>> Connect(const std::string& host,
                                                                   int port,
                                                                   absl::Duration timeout);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  using Store::Wait;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  absl::Status Append(absl::string_view key, absl::string_view value) override;

  Protocol protocol() const { return protocol_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  enum class Query { kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kNumKeys, kDeleteKey };

  TorchStoreClient(std::string host, int port, absl::Duration timeout, Protocol protocol,
                   ScopedFd socket);
  uint8_t Code(Query query) const;
  // Sends `request` (already encoded) and reads `reply_bytes` fixed bytes, or a length-prefixed
  // value when reply_bytes < 0, all within `limit`. Reconnects first when the last call broke
  // the connection; any failure drops it.
  absl::StatusOr<std::string> Call(absl::string_view what, const std::string& request,
                                   int reply_bytes, absl::Duration limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> GetLocked(absl::string_view key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string host_;
  const int port_;
  const Protocol protocol_;
  Mutex mu_;
  ScopedFd socket_ ABSL_GUARDED_BY(mu_);  // Invalid after a failure: the next call reconnects.
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_TORCH_STORE_CLIENT_H_
