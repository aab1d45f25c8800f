#include "frontend/elastic/backup_pool.h"

#include <algorithm>
#include <cstring>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace plexus::elastic {

BackupPool::Buffer BackupPool::Take(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      Buffer buffer{std::move(it->second), it->first};
      pooled_ -= it->first;
      free_.erase(it);
      return buffer;
    }
  }
  return Buffer{std::unique_ptr<uint8_t[]>(new uint8_t[bytes]), bytes};
}

void BackupPool::Give(Buffer buffer) {
  if (buffer.data == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  while (pooled_ + buffer.capacity > kPooledBytes && !free_.empty()) {
    pooled_ -= free_.begin()->first;
    free_.erase(free_.begin());
  }
  if (pooled_ + buffer.capacity > kPooledBytes) return;
  pooled_ += buffer.capacity;
  free_.emplace(buffer.capacity, std::move(buffer.data));
}

// memcpy for backups: on x86-64 with streaming stores, so the copy nobody reads unless the
// operation fails does not push the data the reduction is about to read out of the caches.
void BackupCopy(uint8_t* to, const uint8_t* from, size_t bytes) {
#if defined(__SSE2__)
  if (bytes >= (size_t{1} << 16) && reinterpret_cast<uintptr_t>(to) % 16 == 0) {
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), d);
    }
    _mm_sfence();
    std::memcpy(to + i, from + i, bytes - i);
    return;
  }
#endif
  std::memcpy(to, from, bytes);
}

}  // namespace plexus::elastic
