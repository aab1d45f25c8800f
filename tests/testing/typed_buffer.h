// TypedBuffer: an owned, contiguous buffer of one dtype whose elements are set and read as
// doubles (integers wrap like two's complement; float16/bfloat16 round to nearest even). Used by
// the conformance suite and the benchmark to fill and check tensors of any dtype.
#ifndef PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
#define PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_

#include <cstdint>

#include "base/core/dtype.h"
#include "base/core/tensor.h"

namespace plexus::testing {

// Where TypedBuffers get their memory: the heap by default. The conformance suite and the
// benchmark run on CUDA swap in device memory (cudaMalloc), which the host cannot touch: then
// `upload` and `download` copy between it and a host copy the buffer keeps.
struct BufferMemory {
  void* (*allocate)(size_t bytes);
  void (*release)(void* pointer);
  // Both null for memory the host reads and writes directly.
  void (*upload)(void* memory, const void* host, size_t bytes) = nullptr;
  void (*download)(void* host, const void* memory, size_t bytes) = nullptr;
};
// Applies to buffers made afterwards; returns the previous one.
BufferMemory SetBufferMemory(BufferMemory memory);

// Elements are set and read on the host. In memory the host cannot touch, the host copy goes to
// the memory the first time data() is asked for after a Set, and comes back the first time an
// element is read after data() was handed out: hand data() to an operation, wait for it, then
// read. Every copy is whole.
class TypedBuffer {
 public:
  TypedBuffer(DType dtype, int64_t count);
  TypedBuffer(const TypedBuffer& other);
  TypedBuffer(TypedBuffer&& other) noexcept;
  TypedBuffer& operator=(TypedBuffer other) noexcept;
  ~TypedBuffer();

  void Set(int64_t i, double value);
  double Get(int64_t i) const;
  // The buffer's memory, for a Tensor an operation may read and write.
  void* data();
  // The elements as the host sees them.
  const uint8_t* bytes() const;
  size_t nbytes() const { return nbytes_; }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  Tensor AsTensor(Device device = Device::Cpu()) {
    return Tensor::Flat(data(), dtype_, count_, device);
  }

 private:
  // Which copy holds the elements, where there are two.
  enum class Newer { kNeither, kHost, kMemory };
  void Swap(TypedBuffer& other) noexcept;
  void BringHome() const;

  DType dtype_;
  int64_t count_;
  size_t nbytes_;
  BufferMemory memory_;  // What the buffer came from, and how to reach it.
  uint8_t* host_;        // The elements on the host: the memory itself, or a copy of it.
  void* separate_;       // Memory the host cannot touch; null when host_ is the memory.
  mutable Newer newer_ = Newer::kNeither;
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_TYPED_BUFFER_H_
