#include "tests/testing/typed_buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "algorithms/half.h"

namespace plexus::testing {

using algorithms::BFloat16ToFloat;
using algorithms::FloatToBFloat16;
using algorithms::FloatToHalf;
using algorithms::HalfToFloat;

namespace {

template <typename T>
T Wrap(double value) {
  // Integers wrap like two's complement; go through int64 to define the truncation.
  return static_cast<T>(static_cast<int64_t>(value));
}

void* HeapAllocate(size_t bytes) { return std::calloc(1, bytes == 0 ? 1 : bytes); }

BufferMemory& CurrentMemory() {
  static BufferMemory memory{&HeapAllocate, &std::free};
  return memory;
}

}  // namespace

BufferMemory SetBufferMemory(BufferMemory memory) {
  BufferMemory previous = CurrentMemory();
  CurrentMemory() = memory;
  return previous;
}

TypedBuffer::TypedBuffer(DType dtype, int64_t count)
    : dtype_(dtype),
      count_(count),
      nbytes_(count * DTypeSize(dtype)),
      memory_(CurrentMemory()),
      host_(nullptr),
      separate_(nullptr) {
  if (memory_.upload == nullptr) {
    host_ = static_cast<uint8_t*>(memory_.allocate(nbytes_));
  } else {
    host_ = static_cast<uint8_t*>(HeapAllocate(nbytes_));
    separate_ = memory_.allocate(nbytes_);
    newer_ = Newer::kHost;
  }
  std::memset(host_, 0, nbytes_);
}

TypedBuffer::TypedBuffer(const TypedBuffer& other) : TypedBuffer(other.dtype_, other.count_) {
  if (nbytes_ > 0) std::memcpy(host_, other.bytes(), nbytes_);
}

TypedBuffer::TypedBuffer(TypedBuffer&& other) noexcept
    : dtype_(other.dtype_),
      count_(0),
      nbytes_(0),
      memory_(other.memory_),
      host_(nullptr),
      separate_(nullptr) {
  Swap(other);
}

TypedBuffer& TypedBuffer::operator=(TypedBuffer other) noexcept {
  Swap(other);
  return *this;
}

void TypedBuffer::Swap(TypedBuffer& other) noexcept {
  std::swap(dtype_, other.dtype_);
  std::swap(count_, other.count_);
  std::swap(nbytes_, other.nbytes_);
  std::swap(memory_, other.memory_);
  std::swap(host_, other.host_);
  std::swap(separate_, other.separate_);
  std::swap(newer_, other.newer_);
}

TypedBuffer::~TypedBuffer() {
  if (separate_ != nullptr) {
    memory_.release(separate_);
    std::free(host_);
  } else if (host_ != nullptr) {
    memory_.release(host_);
  }
}

void* TypedBuffer::data() {
  if (separate_ == nullptr) return host_;
  if (newer_ == Newer::kHost) memory_.upload(separate_, host_, nbytes_);
  newer_ = Newer::kMemory;
  return separate_;
}

const uint8_t* TypedBuffer::bytes() const {
  BringHome();
  return host_;
}

void TypedBuffer::BringHome() const {
  if (newer_ != Newer::kMemory) return;
  memory_.download(host_, separate_, nbytes_);
  newer_ = Newer::kNeither;
}

void TypedBuffer::Set(int64_t i, double value) {
  BringHome();
  if (separate_ != nullptr) newer_ = Newer::kHost;
  uint8_t* p = host_ + i * DTypeSize(dtype_);
  switch (dtype_) {
    case DType::kBool: {
      uint8_t v = value != 0;
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::kUInt8: {
      uint8_t v = Wrap<uint8_t>(value);
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::kInt8: {
      int8_t v = Wrap<int8_t>(value);
      std::memcpy(p, &v, 1);
      return;
    }
    case DType::kInt16: {
      int16_t v = Wrap<int16_t>(value);
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::kInt32: {
      int32_t v = Wrap<int32_t>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::kInt64: {
      int64_t v = static_cast<int64_t>(value);
      std::memcpy(p, &v, 8);
      return;
    }
    case DType::kFloat16: {
      uint16_t v = FloatToHalf(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::kBFloat16: {
      uint16_t v = FloatToBFloat16(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::kFloat32: {
      float v = static_cast<float>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::kFloat64:
      std::memcpy(p, &value, 8);
      return;
  }
}

double TypedBuffer::Get(int64_t i) const {
  BringHome();
  const uint8_t* p = host_ + i * DTypeSize(dtype_);
  switch (dtype_) {
    case DType::kBool:
    case DType::kUInt8:
      return *p;
    case DType::kInt8:
      return static_cast<int8_t>(*p);
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return HalfToFloat(v);
    }
    case DType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return BFloat16ToFloat(v);
    }
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

}  // namespace plexus::testing
