// The algorithm table: for each collective, which algorithm of the catalog
// (algorithm_catalog.h) serves which message sizes; the catalog's defaults unless overridden.
// PLEXUS_ALGO overrides it, e.g. PLEXUS_ALGO="all_reduce:0-64K:rd,64K-:ring;broadcast:0-:binomial"
// (sizes in bytes with optional K/M/G suffixes; ranges are [low, high), "64K-" is open).
// Every rank must see the same table, or ranks pick different algorithms and fail with
// FailedPrecondition.
#ifndef PLEXUS_ALGORITHMS_ALGORITHM_TABLE_H_
#define PLEXUS_ALGORITHMS_ALGORITHM_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "algorithms/algorithm_catalog.h"

namespace plexus::algorithms {

struct AlgorithmRange {
  std::string collective;      // "all_reduce", "broadcast", ...
  uint64_t min_bytes;          // Inclusive.
  uint64_t max_bytes;          // Exclusive; UINT64_MAX for open-ended.
  const Algorithm* algorithm;  // Its catalog row: "ring", "rd", "binomial", ...
};

class AlgorithmTable {
 public:
  // The built-in table, with $PLEXUS_ALGO applied when set (an invalid value is an error).
  static absl::StatusOr<AlgorithmTable> FromEnvironment();
  static AlgorithmTable Default();

  // Replaces the ranges of each collective named in `spec`.
  absl::Status Override(absl::string_view spec);

  // The catalog row serving a message of `bytes` (a size no range claims: the collective's
  // first row); the collective must be one of the catalog's.
  const Algorithm& Select(absl::string_view collective, uint64_t bytes) const;
  // Its name.
  absl::string_view Choose(absl::string_view collective, uint64_t bytes) const;

  const std::vector<AlgorithmRange>& ranges() const { return ranges_; }
  std::string ToString() const;

 private:
  std::vector<AlgorithmRange> ranges_;
};

// The algorithms `collective` can run, in catalog order (the first serves unclaimed sizes).
std::vector<std::string> KnownAlgorithms(absl::string_view collective);
// Every collective (range set) of the catalog.
std::vector<std::string> KnownCollectives();

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_ALGORITHM_TABLE_H_
