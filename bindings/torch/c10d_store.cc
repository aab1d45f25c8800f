#include "bindings/torch/c10d_store.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plexus::torch_backend {
namespace {

std::vector<uint8_t> Bytes(absl::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string Text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// Runs `call`, which torch's store bounds by `limit`, turning what it throws into a status naming
// the operation, by what happened rather than the message's words: a failure at `limit` or
// later is DeadlineExceeded; a torch network error or anything earlier is Unavailable.
template <typename Call>
absl::Status Guard(absl::string_view operation, absl::string_view key, absl::Duration limit,
                   Call&& call) {
  const absl::Time start = absl::Now();
  try {
    call();
    return absl::OkStatus();
  } catch (const std::exception& error) {
    std::string message = absl::StrCat("torch store ", operation, "(", key, "): ", error.what());
    // torch's stores wake within a millisecond of their deadline; allow for the clock's grain.
    if (absl::Now() - start + absl::Milliseconds(5) >= limit) {
      return absl::DeadlineExceededError(message);
    }
    return absl::UnavailableError(message);
  }
}

std::chrono::milliseconds ToTorch(absl::Duration timeout) {
  // 0 ms is "no timeout" to c10d: the shortest real wait instead.
  int64_t millis = absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
  return std::chrono::milliseconds(std::max<int64_t>(millis, 1));
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store)
    : Store(absl::Milliseconds(store->getTimeout().count())), store_(std::move(store)) {}

absl::Status C10dStore::Set(absl::string_view key, absl::string_view value) {
  return Guard("set", key, timeout(), [&] { store_->set(std::string(key), Bytes(value)); });
}

absl::StatusOr<std::string> C10dStore::Get(absl::string_view key) {
  // Waiting first bounds the get by this store's timeout rather than torch's.
  absl::Status present = Wait({std::string(key)}, timeout());
  if (!present.ok()) return present;
  std::string value;
  absl::Status status =
      Guard("get", key, timeout(), [&] { value = Text(store_->get(std::string(key))); });
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<int64_t> C10dStore::Add(absl::string_view key, int64_t delta) {
  int64_t value = 0;
  absl::Status status =
      Guard("add", key, timeout(), [&] { value = store_->add(std::string(key), delta); });
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<std::string> C10dStore::CompareSet(absl::string_view key, absl::string_view expected,
                                                  absl::string_view desired) {
  std::string value;
  absl::Status status = Guard("compare_set", key, timeout(), [&] {
    value = Text(store_->compareSet(std::string(key), Bytes(expected), Bytes(desired)));
  });
  if (!status.ok()) return status;
  return value;
}

absl::Status C10dStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  std::vector<std::string> names(keys.begin(), keys.end());
  absl::Status status = Guard("wait", names.empty() ? "" : names.front(), timeout,
                              [&] { store_->wait(names, ToTorch(timeout)); });
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return WaitTimeoutError(timeout, keys, status.message());
  }
  return status;
}

absl::StatusOr<bool> C10dStore::Check(absl::Span<const std::string> keys) {
  std::vector<std::string> names(keys.begin(), keys.end());
  bool present = false;
  absl::Status status = Guard("check", names.empty() ? "" : names.front(), timeout(),
                              [&] { present = store_->check(names); });
  if (!status.ok()) return status;
  return present;
}

absl::StatusOr<bool> C10dStore::DeleteKey(absl::string_view key) {
  bool existed = false;
  absl::Status status =
      Guard("delete_key", key, timeout(), [&] { existed = store_->deleteKey(std::string(key)); });
  if (!status.ok()) return status;
  return existed;
}

absl::StatusOr<int64_t> C10dStore::NumKeys() {
  int64_t count = 0;
  absl::Status status = Guard("num_keys", "", timeout(), [&] { count = store_->getNumKeys(); });
  if (!status.ok()) return status;
  return count;
}

absl::StatusOr<std::vector<std::string>> C10dStore::MultiGet(absl::Span<const std::string> keys) {
  return MultiGetEach(*this, keys);
}

absl::Status C10dStore::MultiSet(absl::Span<const std::string> keys,
                                 absl::Span<const std::string> values) {
  return MultiSetEach(*this, keys, values);
}

absl::Status C10dStore::Append(absl::string_view key, absl::string_view value) {
  return AppendByCompareSet(*this, key, value);
}

}  // namespace plexus::torch_backend
