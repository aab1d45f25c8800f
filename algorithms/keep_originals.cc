#include "algorithms/keep_originals.h"

#include <algorithm>
#include <cstring>

#include "algorithms/collective_context.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace plexus::algorithms {

void CopyAside(uint8_t* to, const uint8_t* from, size_t bytes) {
#if defined(__SSE2__)
  if (bytes >= (size_t{1} << 12)) {
    // Streaming stores want 16-byte aligned destinations: the head up to one goes by memcpy.
    size_t i = (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16;
    std::memcpy(to, from, i);
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

void SaveThenOverwrite(uint8_t* data, const uint8_t* from, uint8_t* save, size_t bytes) {
  // Small enough that a chunk read for the save is still in L1 when it is overwritten.
  constexpr size_t kChunk = 16 << 10;
  for (size_t at = 0; at < bytes; at += kChunk) {
    const size_t n = std::min(kChunk, bytes - at);
    CopyAside(save + at, data + at, n);
    std::memcpy(data + at, from + at, n);
  }
}

void KeepRemainingOriginals(CollectiveContext& ctx, const void* data, size_t bytes) {
  const size_t kept = ctx.originals_kept();
  if (ctx.originals() == nullptr || kept >= bytes) return;
  CopyAside(ctx.originals() + kept, static_cast<const uint8_t*>(data) + kept, bytes - kept);
  ctx.OriginalsKeptUpTo(bytes);
}

}  // namespace plexus::algorithms
