// Bytes per peer of an all_to_all_single tensor, whose split sizes count first-dimension rows
// (what a library's all-to-all-v takes).
#ifndef PLEXUS_BACKENDS_COMMON_SPLIT_BYTES_H_
#define PLEXUS_BACKENDS_COMMON_SPLIT_BYTES_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "base/core/tensor.h"

namespace plexus {

inline std::vector<int64_t> SplitBytes(const Tensor& tensor, absl::Span<const int64_t> splits) {
  const int64_t rows = tensor.shape().empty() ? tensor.numel() : tensor.shape()[0];
  const int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(tensor.nbytes()) / rows;
  std::vector<int64_t> bytes;
  for (int64_t split : splits) bytes.push_back(split * row_bytes);
  return bytes;
}

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_COMMON_SPLIT_BYTES_H_
