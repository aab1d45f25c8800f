// TypedBuffer: an owned, contiguous buffer of one dtype whose elements are set and read as
// doubles (integers wrap like two's complement; float16/bfloat16 round to nearest even). Used by
// the conformance suite and the benchmark to fill and check tensors of any dtype.
#ifndef PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
#define PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_

#include <cstdint>
#include <vector>

#include "frontend/core/dtype.h"
#include "frontend/core/tensor.h"

namespace plexus::testing {

class TypedBuffer {
 public:
  TypedBuffer(DType dtype, int64_t count)
      : dtype_(dtype), count_(count), bytes_(count * DTypeSize(dtype)) {}
  void Set(int64_t i, double value);
  double Get(int64_t i) const;
  void* data() { return bytes_.data(); }
  const uint8_t* bytes() const { return bytes_.data(); }
  size_t nbytes() const { return bytes_.size(); }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  Tensor AsTensor() { return Tensor::Flat(bytes_.data(), dtype_, count_); }

 private:
  DType dtype_;
  int64_t count_;
  std::vector<uint8_t> bytes_;
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
