// The tcp transport's wire frame and the send or receive that moves one: what the loop, the
// send lanes and the receive matcher share.
#ifndef PLEXUS_BACKENDS_TCP_TCP_FRAME_H_
#define PLEXUS_BACKENDS_TCP_TCP_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/time/time.h"
#include "base/transport/transport.h"
#include "base/work/work.h"

namespace plexus::tcp {

// Frame header on the wire, little endian: type, reserved (4 bytes each), tag, signature and
// payload size (8 bytes each). Abort frames carry the operation in `tag`, the status code in
// `signature` and the reason as payload. A goodbye frame is the last a rank sends when it shuts
// down cleanly: its peers keep what already arrived, and only a close without one (a crash)
// breaks the group. A heartbeat frame (header only) goes to each peer a fifth of the heartbeat
// interval apart; a peer from which nothing at all arrived for the interval is lost.
inline constexpr size_t kFrameHeaderBytes = 32;
enum class FrameType : uint32_t { kData = 1, kAbort = 2, kGoodbye = 3, kHeartbeat = 4 };

struct FrameHeader {
  uint32_t type = 0;  // A FrameType, unless the peer sent garbage.
  uint64_t tag = 0;
  uint64_t signature = 0;
  uint64_t size = 0;
};

void EncodeHeader(char* out, FrameType type, uint64_t tag, uint64_t signature, uint64_t size);
FrameHeader DecodeHeader(const char* in);

// A pending send or receive.
struct Op {
  enum class Kind { kSend, kRecv, kRecvAny };
  Kind kind;
  int peer;  // For kRecvAny: -1 until matched.
  MessageTag tag;
  uint8_t* data;  // Receive target, or the caller's send buffer.
  uint64_t size;
  absl::Time deadline;
  absl::Duration timeout;
  WorkPtr work;
  bool done = false;
  bool receiving = false;  // Payload is being read into `data` right now.
  // Sends only.
  char header[kFrameHeaderBytes];
  const uint8_t* payload = nullptr;  // `data`, or `owned` once the caller's buffer is released.
  uint64_t written = 0;              // Header + payload bytes written so far.
  std::unique_ptr<uint8_t[]> owned;
  std::multimap<absl::Time, std::shared_ptr<Op>>::iterator timer;
  bool has_timer = false;
  bool counted = false;     // Counted in its lane's `queued`.
  bool loop_frame = false;  // An abort or goodbye the loop itself queued.
};
using OpPtr = std::shared_ptr<Op>;

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_TCP_FRAME_H_
