// TypedBuffer: an owned, contiguous buffer of one dtype whose elements are set and read as
// doubles (integers wrap like two's complement; float16/bfloat16 round to nearest even). Used by
// the conformance suite and the benchmark to fill and check tensors of any dtype.
#ifndef PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
#define PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_

#include <cstdint>

#include "frontend/core/dtype.h"
#include "frontend/core/tensor.h"

namespace plexus::testing {

// Where TypedBuffers get their memory: the heap by default; the conformance suite run on CUDA
// swaps in CUDA managed memory, which the host reads and writes and NCCL accepts.
struct BufferMemory {
  void* (*allocate)(size_t bytes);
  void (*release)(void* pointer);
};
// Applies to buffers made afterwards; returns the previous one.
BufferMemory SetBufferMemory(BufferMemory memory);

class TypedBuffer {
 public:
  TypedBuffer(DType dtype, int64_t count);
  TypedBuffer(const TypedBuffer& other);
  TypedBuffer(TypedBuffer&& other) noexcept;
  TypedBuffer& operator=(TypedBuffer other) noexcept;
  ~TypedBuffer();

  void Set(int64_t i, double value);
  double Get(int64_t i) const;
  void* data() { return bytes_; }
  const uint8_t* bytes() const { return bytes_; }
  size_t nbytes() const { return nbytes_; }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  Tensor AsTensor(Device device = Device::Cpu()) {
    return Tensor::Flat(bytes_, dtype_, count_, device);
  }

 private:
  DType dtype_;
  int64_t count_;
  size_t nbytes_;
  uint8_t* bytes_;
  void (*release_)(void*);  // How bytes_ goes back: the memory it came from.
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
