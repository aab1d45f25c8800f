#include "base/store/key_value_table.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace plexus {

void KeyValueTable::Set(absl::string_view key, absl::string_view value) {
  map_[key] = std::string(value);
}

const std::string* KeyValueTable::Find(absl::string_view key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> KeyValueTable::Add(absl::string_view key, int64_t delta) {
  int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end() && !absl::SimpleAtoi(it->second, &current)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "add: the value of key '", key, "' is not an integer (", it->second.size(), " bytes)"));
  }
  int64_t updated = 0;
  if (__builtin_add_overflow(current, delta, &updated)) {  // Deltas come from the network.
    return absl::InvalidArgumentError(absl::StrCat("add: ", current, " + ", delta, " on key '", key,
                                                   "' overflows a 64-bit integer"));
  }
  map_[key] = absl::StrCat(updated);
  return updated;
}

std::string KeyValueTable::CompareSet(absl::string_view key, absl::string_view expected,
                                      absl::string_view desired) {
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return std::string(expected);
    map_[key] = std::string(desired);
    return std::string(desired);
  }
  if (it->second == expected) it->second = std::string(desired);
  return it->second;
}

bool KeyValueTable::Delete(absl::string_view key) { return map_.erase(key) > 0; }

void KeyValueTable::Append(absl::string_view key, absl::string_view value) {
  map_[key].append(value.data(), value.size());
}

bool KeyValueTable::ContainsAll(absl::Span<const std::string> keys) const {
  for (const std::string& key : keys) {
    if (!map_.contains(key)) return false;
  }
  return true;
}

std::vector<std::string> KeyValueTable::Missing(absl::Span<const std::string> keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!map_.contains(key)) missing.push_back(key);
  }
  return missing;
}

}  // namespace plexus
