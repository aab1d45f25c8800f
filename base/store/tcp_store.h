// TCPStore: a Store served over TCP by a TCPStoreServer, as c10d's TCPStore.
//
// One process (usually rank 0) creates it with is_server = true, which starts the server in a
// thread of that process; every process, the server's included, talks to it as a client.
// Clients connect with retry and backoff until `timeout`, so ranks may start in any order.
// Requests on one TCPStore are serialised; use one TCPStore per thread for parallelism.
#ifndef PLEXUS_BASE_STORE_TCP_STORE_H_
#define PLEXUS_BASE_STORE_TCP_STORE_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/auth/tls.h"
#include "base/core/mutex.h"
#include "base/net/socket_util.h"
#include "base/store/store.h"
#include "base/store/tcp_store_protocol.h"
#include "base/store/tcp_store_server.h"

namespace plexus {

struct TCPStoreOptions {
  std::string host = "127.0.0.1";  // Server address; the server binds it when is_server.
  // With is_server: the address to bind instead of `host` ("*" for every interface; see
  // ListenTcp). Empty binds `host`.
  std::string bind_host;
  int port = 0;  // 0 with is_server picks a free port; see TCPStore::port().
  bool is_server = false;
  // Clients expected, the server's own included (torch's world_size). 0 = unknown.
  int world_size = 0;
  // With is_server and world_size > 0, Create() returns only once world_size clients joined.
  bool wait_for_workers = true;
  absl::Duration timeout = kDefaultStoreTimeout;  // Connecting, and every blocking operation.
  uint64_t max_frame_bytes = tcp_store::kDefaultMaxFrameBytes;
  // A server silent this long while a request waits for its answer is lost (Unavailable); it
  // beats while it holds a request. Unset: PLEXUS_HEARTBEAT (default 5 s); Infinite: never.
  std::optional<absl::Duration> heartbeat;
  // Shared secret proven both ways on connecting (base/auth/mutual_auth.h); the server,
  // when is_server, requires it of every client. Unset: PLEXUS_SECRET / PLEXUS_SECRET_FILE;
  // empty: none.
  std::optional<std::string> secret;
  // TLS for the connection (base/auth/tls.h); the server, when is_server, requires it of
  // every client. Unset: PLEXUS_TLS_CERT / PLEXUS_TLS_KEY / PLEXUS_TLS_CA; disabled: none.
  std::optional<auth::TlsFiles> tls;
};

class TCPStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<TCPStore>> Create(TCPStoreOptions options);
  ~TCPStore() override;

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
  absl::StatusOr<int64_t> ServerUnixNanos() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  absl::Status Append(absl::string_view key, absl::string_view value) override;

  // Waits until `count` clients are connected to the server.
  absl::Status WaitForClients(int count, absl::Duration timeout);

  const std::string& host() const { return options_.host; }
  int port() const { return port_; }
  bool is_server() const { return server_ != nullptr; }
  std::string RefusalReport() const override {
    return server_ != nullptr ? server_->RefusalReport() : "";
  }

 private:
  TCPStore(TCPStoreOptions options, std::unique_ptr<TCPStoreServer> server, int port,
           Connection socket);

  // Sends one request and reads its response payload (after the status byte). `wait` is how
  // long the server may legitimately hold the request before answering.
  absl::StatusOr<std::string> Call(absl::string_view op_name, const tcp_store::Encoder& request,
                                   absl::Duration wait = absl::ZeroDuration());

  // Reads one response frame's payload, skipping heartbeats; Unavailable (via `lost`) when the
  // server goes silent for the heartbeat interval.
  absl::StatusOr<std::string> ReadResponse(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TCPStoreOptions options_;
  const std::unique_ptr<TCPStoreServer> server_;  // Declared first: destroyed last.
  const int port_;
  Mutex mu_;
  Connection socket_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // Set once the connection is unusable.
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_TCP_STORE_H_
