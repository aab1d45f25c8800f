#include "base/core/collective.h"

#include <iterator>

namespace plexus {

const CollectiveTraits& TraitsOf(CollectiveKind kind) {
  // Rows are in kind order from 1, so the number indexes the table.
  static constexpr CollectiveTraits kUnknown = {CollectiveKind{0}, "unknown",
                                                CollectiveShape::kOwnRule, 0};
  const size_t index = static_cast<size_t>(kind) - 1;
  if (index >= std::size(kCollectiveTraits)) return kUnknown;
  return kCollectiveTraits[index];
}

}  // namespace plexus
