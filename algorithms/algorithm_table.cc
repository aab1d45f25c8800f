#include "algorithms/algorithm_table.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/byte_size.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"

namespace plexus::algorithms {
namespace {

constexpr uint64_t kOpen = kNoSizeLimit;

}  // namespace

std::vector<std::string> KnownAlgorithms(absl::string_view collective) {
  std::vector<std::string> names;
  for (const Algorithm& row : AlgorithmCatalog()) {
    if (row.collective == collective) names.push_back(row.name);
  }
  return names;
}

std::vector<std::string> KnownCollectives() {
  std::vector<std::string> names;
  for (const Algorithm& row : AlgorithmCatalog()) {
    if (names.empty() || names.back() != row.collective) names.push_back(row.collective);
  }
  return names;
}

AlgorithmTable AlgorithmTable::Default() {
  AlgorithmTable table;
  for (const std::string& collective : KnownCollectives()) {
    const size_t first = table.ranges_.size();
    for (const Algorithm& row : AlgorithmCatalog()) {
      if (row.collective == collective && row.default_from < row.default_to) {
        table.ranges_.push_back({row.collective, row.default_from, row.default_to, &row});
      }
    }
    std::sort(
        table.ranges_.begin() + first, table.ranges_.end(),
        [](const AlgorithmRange& a, const AlgorithmRange& b) { return a.min_bytes < b.min_bytes; });
  }
  return table;
}

absl::StatusOr<AlgorithmTable> AlgorithmTable::FromEnvironment() {
  AlgorithmTable table = Default();
  if (const char* spec = ReadEnvironment("PLEXUS_ALGO"); spec != nullptr && *spec != '\0') {
    absl::Status status = table.Override(spec);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("PLEXUS_ALGO: ", status.message()));
    }
  }
  return table;
}

absl::Status AlgorithmTable::Override(absl::string_view spec) {
  for (absl::string_view clause : absl::StrSplit(spec, ';', absl::SkipWhitespace())) {
    const size_t colon = clause.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", clause, "' should look like all_reduce:0-64K:rd,64K-:ring"));
    }
    const std::string collective(absl::StripAsciiWhitespace(clause.substr(0, colon)));
    if (KnownAlgorithms(collective).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown collective '", collective,
                       "'; known: ", absl::StrJoin(KnownCollectives(), ", ")));
    }
    std::vector<AlgorithmRange> ranges;
    for (absl::string_view item : absl::StrSplit(clause.substr(colon + 1), ',')) {
      std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
      if (parts.size() != 2 || parts[0].find('-') == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", item, "' should look like LOW-HIGH:ALGORITHM, e.g. 64K-:ring"));
      }
      const size_t dash = parts[0].find('-');
      ASSIGN_OR_RETURN(uint64_t low, ParseByteSize(parts[0].substr(0, dash)));
      uint64_t high = kOpen;
      if (dash + 1 < parts[0].size()) {
        ASSIGN_OR_RETURN(high, ParseByteSize(parts[0].substr(dash + 1)));
      }
      const absl::string_view name = absl::StripAsciiWhitespace(parts[1]);
      const Algorithm* algorithm = FindAlgorithm(collective, name);
      if (algorithm == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown algorithm '", name, "' for ", collective,
                         "; known: ", absl::StrJoin(KnownAlgorithms(collective), ", ")));
      }
      if (low >= high) {
        return absl::InvalidArgumentError(absl::StrCat("empty range '", parts[0], "'"));
      }
      ranges.push_back({collective, low, high, algorithm});
    }
    ranges_.erase(
        std::remove_if(ranges_.begin(), ranges_.end(),
                       [&](const AlgorithmRange& r) { return r.collective == collective; }),
        ranges_.end());
    ranges_.insert(ranges_.end(), ranges.begin(), ranges.end());
  }
  return absl::OkStatus();
}

absl::string_view AlgorithmTable::Choose(absl::string_view collective, uint64_t bytes) const {
  return Select(collective, bytes).name;
}

const Algorithm& AlgorithmTable::Select(absl::string_view collective, uint64_t bytes) const {
  for (const AlgorithmRange& range : ranges_) {
    // string_view equality tests the lengths first (std::string's compare does not).
    if (bytes >= range.min_bytes && bytes < range.max_bytes &&
        absl::string_view(range.collective) == collective) {
      return *range.algorithm;
    }
  }
  // A gap left by an override falls back to the collective's first algorithm.
  for (const Algorithm& row : AlgorithmCatalog()) {
    if (row.collective == collective) return row;
  }
  assert(false && "Select of a collective the catalog does not hold");
  return AlgorithmCatalog().front();
}

std::string AlgorithmTable::ToString() const {
  return absl::StrJoin(ranges_, ";", [](std::string* out, const AlgorithmRange& r) {
    absl::StrAppend(out, r.collective, ":", r.min_bytes, "-",
                    r.max_bytes == kOpen ? std::string() : absl::StrCat(r.max_bytes), ":",
                    r.algorithm->name);
  });
}

}  // namespace plexus::algorithms
