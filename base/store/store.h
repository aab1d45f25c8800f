// Store: the key-value rendezvous service ranks meet through, with the operations of c10d's
// Store. Implementations: HashStore (one process), FileStore (processes sharing a file
// system), TCPStore (a server and its clients) and PrefixStore (a namespace over another).
//
// Values are byte strings. Counters written by Add() are decimal text, as in c10d. Every
// blocking call has a deadline: Get(), MultiGet() and the one-argument Wait() use timeout().
// All methods are thread-safe.
#ifndef PLEXUS_BASE_STORE_STORE_H_
#define PLEXUS_BASE_STORE_STORE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace plexus {

// torch.distributed's default store timeout.
inline constexpr absl::Duration kDefaultStoreTimeout = absl::Seconds(300);

class Store {
 public:
  explicit Store(absl::Duration timeout = kDefaultStoreTimeout) { SetTimeout(timeout); }
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Waits up to timeout() for `key` to exist, then returns its value.
  virtual absl::StatusOr<std::string> Get(absl::string_view key) = 0;

  // Adds `delta` to the integer stored at `key` (0 if absent) and returns the new value.
  // InvalidArgument if the current value is not an integer.
  virtual absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) = 0;

  // c10d semantics: sets `desired` if the current value equals `expected` (an absent key
  // matches an empty `expected`); returns the value now stored (for an absent key with a
  // non-empty `expected`, returns `expected` and stores nothing).
  virtual absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                                 absl::string_view desired) = 0;

  // Waits until every key exists; DeadlineExceeded after `timeout`, naming the missing keys.
  virtual absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) = 0;
  absl::Status Wait(absl::Span<const std::string> keys) { return Wait(keys, timeout()); }

  // True when every key exists; never blocks.
  virtual absl::StatusOr<bool> Check(absl::Span<const std::string> keys) = 0;

  // Removes `key`; returns whether it existed.
  virtual absl::StatusOr<bool> DeleteKey(absl::string_view key) = 0;

  virtual absl::StatusOr<int64_t> NumKeys() = 0;

  // Waits up to timeout() for all keys, then returns their values in order.
  virtual absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) = 0;

  // Sets keys[i] = values[i] for all i, atomically with respect to other operations.
  virtual absl::Status MultiSet(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values) = 0;

  // Appends `value` to the value at `key` (creating it when absent).
  virtual absl::Status Append(absl::string_view key, absl::string_view value) = 0;

  // What a server this process hosts for the store refused so far ("2 connection(s) refused,
  // the last from ADDR: why"), so a rank waiting for another can say why it may never come;
  // "" when it refused nothing or the store has no server here.
  virtual std::string RefusalReport() const { return ""; }

  // The wall clock (Unix nanoseconds) of the machine that serves the store, for aligning the
  // ranks' clocks (EstimateClockOffset); Unimplemented for a store without a server.
  virtual absl::StatusOr<int64_t> ServerUnixNanos() {
    return absl::UnimplementedError("this store has no server clock");
  }

  absl::Duration timeout() const { return absl::Nanoseconds(timeout_ns_.load()); }
  void SetTimeout(absl::Duration timeout) { timeout_ns_.store(absl::ToInt64Nanoseconds(timeout)); }

 private:
  std::atomic<int64_t> timeout_ns_{0};
};

// "timed out after 2s waiting for keys [a, b]" followed by `detail` when not empty.
absl::Status WaitTimeoutError(absl::Duration timeout, absl::Span<const std::string> keys,
                              absl::string_view detail = "");

// InvalidArgument unless keys and values have the same length.
absl::Status CheckMultiSetSizes(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values);

// For stores over a service without multi-key operations or append (torch's stores, stores
// written in Python): MultiGet and MultiSet key by key (not atomic across keys), and Append as
// read-then-compare-set, retried while other writers race it, for up to store.timeout().
absl::StatusOr<std::vector<std::string>> MultiGetEach(Store& store,
                                                      absl::Span<const std::string> keys);
absl::Status MultiSetEach(Store& store, absl::Span<const std::string> keys,
                          absl::Span<const std::string> values);
absl::Status AppendByCompareSet(Store& store, absl::string_view key, absl::string_view value);

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_STORE_H_
