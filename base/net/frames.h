// Length-prefixed frames, as the TCPStore and the elastic master speak them: the payload's
// length in 8 bytes, little-endian, then the payload. Each protocol says what a payload holds;
// a reader refuses a length over its own cap before it buffers the payload.
#ifndef PLEXUS_BASE_NET_FRAMES_H_
#define PLEXUS_BASE_NET_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/net/socket_util.h"

namespace plexus {

inline constexpr size_t kFrameLengthBytes = 8;  // The header: the length alone.

// `payload` behind its header.
std::string Framed(absl::string_view payload);
// The payload length a header announces.
uint64_t FrameLength(const char* header);

// The frame at the front of a buffer.
struct FrameAtFront {
  enum class State {
    kWhole,      // `payload` is all there.
    kPartial,    // More bytes are needed.
    kOversized,  // The header announces more than the reader's cap: `length`.
  };
  State state;
  uint64_t length = 0;        // Known once the header is there.
  absl::string_view payload;  // kWhole only; a view into the buffer.

  // Header and payload: how far the next frame starts (kWhole only).
  size_t size() const { return kFrameLengthBytes + length; }
};
FrameAtFront PeekFrame(absl::string_view bytes, uint64_t max_payload);

// Reads one frame from a socket by `deadline`, through `cipher` when it is not null.
// InvalidArgument naming both sizes when the length passes `max_payload`.
absl::StatusOr<std::string> ReceiveFrame(int fd, StreamCipher* cipher, uint64_t max_payload,
                                         absl::Time deadline);

// "a frame of N bytes, over the cap of M", for the errors of readers that refuse one.
std::string OversizedFrame(uint64_t length, uint64_t max_payload);

}  // namespace plexus

#endif  // PLEXUS_BASE_NET_FRAMES_H_
