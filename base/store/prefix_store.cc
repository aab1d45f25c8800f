#include "base/store/prefix_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/core/status_macros.h"

namespace plexus {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base->timeout()), prefix_(std::move(prefix)), base_(std::move(base)) {}

std::string PrefixStore::Prefixed(absl::string_view key) const {
  return absl::StrCat(prefix_, "/", key);
}

std::vector<std::string> PrefixStore::Prefixed(absl::Span<const std::string> keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(Prefixed(key));
  return prefixed;
}

absl::Status PrefixStore::Set(absl::string_view key, absl::string_view value) {
  return base_->Set(Prefixed(key), value);
}

absl::Status PrefixStore::Unprefixed(absl::Status status) const {
  if (status.ok()) return status;
  std::string message = absl::StrReplaceAll(status.message(), {{Prefixed(""), ""}});
  return absl::Status(status.code(), absl::StrCat(message, " (namespace '", prefix_, "')"));
}

absl::StatusOr<std::string> PrefixStore::Get(absl::string_view key) {
  const std::string keys[] = {Prefixed(key)};
  RETURN_IF_ERROR(Unprefixed(base_->Wait(keys, timeout())));
  return base_->Get(keys[0]);
}

absl::StatusOr<int64_t> PrefixStore::Add(absl::string_view key, int64_t delta) {
  return base_->Add(Prefixed(key), delta);
}

absl::StatusOr<std::string> PrefixStore::CompareSet(absl::string_view key,
                                                    absl::string_view expected,
                                                    absl::string_view desired) {
  return base_->CompareSet(Prefixed(key), expected, desired);
}

absl::Status PrefixStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  return Unprefixed(base_->Wait(Prefixed(keys), timeout));
}

absl::StatusOr<bool> PrefixStore::Check(absl::Span<const std::string> keys) {
  return base_->Check(Prefixed(keys));
}

absl::StatusOr<bool> PrefixStore::DeleteKey(absl::string_view key) {
  return base_->DeleteKey(Prefixed(key));
}

absl::StatusOr<int64_t> PrefixStore::NumKeys() { return base_->NumKeys(); }

absl::StatusOr<std::vector<std::string>> PrefixStore::MultiGet(absl::Span<const std::string> keys) {
  std::vector<std::string> prefixed = Prefixed(keys);
  RETURN_IF_ERROR(Unprefixed(base_->Wait(prefixed, timeout())));
  return base_->MultiGet(prefixed);
}

absl::Status PrefixStore::MultiSet(absl::Span<const std::string> keys,
                                   absl::Span<const std::string> values) {
  return base_->MultiSet(Prefixed(keys), values);
}

absl::Status PrefixStore::Append(absl::string_view key, absl::string_view value) {
  return base_->Append(Prefixed(key), value);
}

}  // namespace plexus
