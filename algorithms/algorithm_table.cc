#include "algorithms/algorithm_table.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

struct Known {
  const char* collective;
  std::vector<std::string> algorithms;
};

const std::vector<Known>& KnownTable() {
  static const auto* table = new std::vector<Known>{
      {"all_reduce", {"ring", "rd", "hd"}},
      // When every rank of the group shares this host (and its shared-memory arena).
      {"all_reduce_same_host", {"shm_rs", "shm", "ring", "rd", "hd"}},
      // When the group spans hosts and some host runs several of its ranks.
      {"all_reduce_multi_host", {"hier", "ring", "rd", "hd"}},
      {"broadcast", {"binomial"}},
      {"reduce", {"binomial"}},
      {"all_gather", {"ring"}},
      {"gather", {"linear"}},
      {"scatter", {"linear"}},
      {"reduce_scatter", {"ring"}},
      {"all_to_all", {"pairwise"}},
      {"barrier", {"dissemination"}},
      // When every rank of the group shares this host (and its shared-memory arena).
      {"barrier_same_host", {"shm", "dissemination"}},
  };
  return *table;
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        scale = uint64_t{1} << 10;
        break;
      case 'M':
        scale = uint64_t{1} << 20;
        break;
      case 'G':
        scale = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "'"));
  }
  return value * scale;
}

}  // namespace

std::vector<std::string> KnownAlgorithms(absl::string_view collective) {
  for (const Known& known : KnownTable()) {
    if (known.collective == collective) return known.algorithms;
  }
  return {};
}

AlgorithmTable AlgorithmTable::Default() {
  AlgorithmTable table;
  for (const Known& known : KnownTable()) {
    if (std::string(known.collective) == "all_reduce") {
      // Below 128 KiB latency dominates: log2(p) whole-buffer exchanges beat 2 log2(p) steps
      // (over TCP at 64 KiB, medians of 6-8 runs: 2 ranks 33 against 43 us, 4 ranks 129
      // against 146, 8 ranks 353 against 405; at 128 KiB 8 ranks already favour hd).
      // Up to 8 MiB halving-doubling moves the ring's bytes in 2 log2(p) steps (8 ranks,
      // 256 KiB: 2.1 ms against 2.9 ms); above, the ring's scratch (2 size/p, not size/2) wins.
      table.ranges_.push_back({"all_reduce", 0, 128 << 10, "rd"});
      table.ranges_.push_back({"all_reduce", 128 << 10, 8 << 20, "hd"});
      table.ranges_.push_back({"all_reduce", 8 << 20, kOpen, "ring"});
      continue;
    }
    if (std::string(known.collective) == "all_reduce_same_host") {
      // One synchronisation per piece while latency dominates; above, each element reduced
      // once by its block's owner.
      table.ranges_.push_back({known.collective, 0, 64 << 10, "shm"});
      table.ranges_.push_back({known.collective, 64 << 10, kOpen, "shm_rs"});
      continue;
    }
    if (std::string(known.collective) == "all_reduce_multi_host") {
      // Small messages pay for the hierarchy's two extra hops; large ones gain from sending
      // one flow per host across the network instead of one per rank.
      table.ranges_.push_back({known.collective, 0, 64 << 10, "rd"});
      table.ranges_.push_back({known.collective, 64 << 10, kOpen, "hier"});
      continue;
    }
    table.ranges_.push_back({known.collective, 0, kOpen, known.algorithms.front()});
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
    const std::vector<std::string> known = KnownAlgorithms(collective);
    if (known.empty()) {
      std::vector<std::string> names;
      for (const Known& k : KnownTable()) names.push_back(k.collective);
      return absl::InvalidArgumentError(absl::StrCat("unknown collective '", collective,
                                                     "'; known: ", absl::StrJoin(names, ", ")));
    }
    std::vector<AlgorithmRange> ranges;
    for (absl::string_view item : absl::StrSplit(clause.substr(colon + 1), ',')) {
      std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
      if (parts.size() != 2 || parts[0].find('-') == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", item, "' should look like LOW-HIGH:ALGORITHM, e.g. 64K-:ring"));
      }
      const size_t dash = parts[0].find('-');
      ASSIGN_OR_RETURN(uint64_t low, ParseSize(parts[0].substr(0, dash)));
      uint64_t high = kOpen;
      if (dash + 1 < parts[0].size()) {
        ASSIGN_OR_RETURN(high, ParseSize(parts[0].substr(dash + 1)));
      }
      const std::string algorithm(absl::StripAsciiWhitespace(parts[1]));
      if (std::find(known.begin(), known.end(), algorithm) == known.end()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown algorithm '", algorithm, "' for ",
                                                       collective,
                                                       "; known: ", absl::StrJoin(known, ", ")));
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
  for (const AlgorithmRange& range : ranges_) {
    // string_view equality tests the lengths first (std::string's compare does not).
    if (bytes >= range.min_bytes && bytes < range.max_bytes &&
        absl::string_view(range.collective) == collective) {
      return range.algorithm;
    }
  }
  // A gap left by an override falls back to the collective's default algorithm.
  for (const Known& known : KnownTable()) {
    if (known.collective == collective) return known.algorithms.front();  // Static storage.
  }
  return absl::string_view();
}

std::string AlgorithmTable::ToString() const {
  return absl::StrJoin(ranges_, ";", [](std::string* out, const AlgorithmRange& r) {
    absl::StrAppend(out, r.collective, ":", r.min_bytes, "-",
                    r.max_bytes == kOpen ? std::string() : absl::StrCat(r.max_bytes), ":",
                    r.algorithm);
  });
}

}  // namespace plexus
