// The TCPStore wire protocol, shared by server and client.
//
// A connection opens with a handshake: the client sends kMagic (4 bytes), kProtocolVersion
// (2 bytes) and how often it wants a heartbeat while a request is parked (2 bytes, in units of
// kBeatUnit; 0 for never); the server answers the same 8 bytes with a status in place of the
// last two. A bad magic or version closes the connection. A heartbeat is an empty frame
// (length 0, which no response is): the client skips it, and takes a server silent for its
// heartbeat interval (base/core/heartbeat.h) while it waits for an answer as lost.
//
// Then every request and response is a frame (base/net/frames.h): an 8-byte little-endian
// payload length followed by the payload. A request payload is an Opcode byte and its fields; a
// response payload is an absl::StatusCode byte followed by the result fields (or an error message).
// Fields are little-endian int64s, strings (4-byte length + bytes) and string lists (4-byte count +
// strings). Every length read is checked against the bytes that remain, and a frame longer than
// the configured cap closes the connection before anything is allocated for it.
#ifndef PLEXUS_BASE_STORE_TCP_STORE_PROTOCOL_H_
#define PLEXUS_BASE_STORE_TCP_STORE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace plexus::tcp_store {

inline constexpr uint32_t kMagic = 0x53584C50;  // "PLXS" on the wire.
inline constexpr uint16_t kProtocolVersion = 3;
inline constexpr absl::Duration kBeatUnit = absl::Milliseconds(10);
inline constexpr size_t kHandshakeBytes = 8;
// Default cap on one frame (keys, values and overhead): 64 MiB.
inline constexpr uint64_t kDefaultMaxFrameBytes = 64u << 20;

enum class Opcode : uint8_t {
  kSet = 1,           // key, value
  kGet = 2,           // key, timeout_ms -> value (waits for the key)
  kAdd = 3,           // key, delta -> new value
  kCompareSet = 4,    // key, expected, desired -> current value
  kWait = 5,          // keys, timeout_ms
  kCheck = 6,         // keys -> 0/1
  kDelete = 7,        // key -> 0/1
  kNumKeys = 8,       // -> count
  kMultiGet = 9,      // keys, timeout_ms -> values (waits for all)
  kMultiSet = 10,     // keys, values
  kAppend = 11,       // key, value
  kWaitClients = 12,  // count, timeout_ms (waits until `count` clients have connected)
  kClock = 13,        // -> the server's wall clock, Unix nanoseconds (new in version 3)
};

// `field`: the client's heartbeat period (BeatField), or the server's status.
std::string HandshakeBytes(uint16_t field);
// Checks magic and version of a handshake; InvalidArgument describes what was wrong.
absl::Status ParseHandshake(absl::string_view bytes, uint16_t* field);
// A heartbeat period as the handshake carries it (rounded down to kBeatUnit, at least one
// unit; 0 for InfiniteDuration), and back.
uint16_t BeatField(absl::Duration period);
absl::Duration BeatPeriod(uint16_t field);
// The frame a server sends as a heartbeat: an empty one.
std::string HeartbeatFrame();

// Appends fields to a payload.
class Encoder {
 public:
  Encoder& U8(uint8_t value);
  Encoder& I64(int64_t value);
  Encoder& Str(absl::string_view value);
  Encoder& StrList(absl::Span<const std::string> values);
  // The payload with its frame header in front.
  std::string Frame() const;

 private:
  std::string payload_;
};

// Reads fields from a payload; every read is bounds-checked.
class Decoder {
 public:
  explicit Decoder(absl::string_view payload) : rest_(payload) {}
  absl::StatusOr<uint8_t> U8();
  absl::StatusOr<int64_t> I64();
  absl::StatusOr<std::string> Str();
  absl::StatusOr<std::vector<std::string>> StrList();
  // InvalidArgument unless every byte was consumed.
  absl::Status Done() const;

 private:
  absl::Status Need(size_t bytes, absl::string_view what) const;
  absl::string_view rest_;
};

}  // namespace plexus::tcp_store

#endif  // PLEXUS_BASE_STORE_TCP_STORE_PROTOCOL_H_
