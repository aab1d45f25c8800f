// The wire protocol between elastic peers and their master.
//
// A connection is a sequence of frames (base/net/frames.h), each an 8-byte little-endian payload
// length and the payload: a MessageType byte, a count of 64-bit integers (at most kMaxInts), the
// integers, and one string (4-byte length, bytes). The first frame a peer sends is kHello carrying
// kMagic and kProtocolVersion; anything else closes the connection. Frames above kMaxFrameBytes
// close it too, before anything is allocated. Both sides send kHeartbeat while otherwise silent; a
// side silent for the heartbeat timeout is treated as lost. The meaning of `ints` per type is
// below.
#ifndef PLEXUS_FRONTEND_ELASTIC_MASTER_PROTOCOL_H_
#define PLEXUS_FRONTEND_ELASTIC_MASTER_PROTOCOL_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "frontend/elastic/elastic_types.h"
#include "frontend/elastic/shared_state.h"

namespace plexus::elastic {

inline constexpr int64_t kMagic = 0x45584C50;  // "PLXE"
inline constexpr int64_t kProtocolVersion = 4;
inline constexpr uint64_t kMaxFrameBytes = 4 << 20;
inline constexpr int64_t kMaxInts = 1 << 18;
// How much later than the master a peer gives up waiting for a reply to a request that carries
// a timeout: the master's answer, which names whom it waited for, arrives first.
inline constexpr absl::Duration kMasterAnswerGrace = absl::Seconds(5);
// The timeout a request carries: milliseconds left until `deadline` (0 once it passed).
inline int64_t MillisecondsLeft(absl::Time deadline) {
  return absl::ToInt64Milliseconds(std::max(deadline - absl::Now(), absl::ZeroDuration()));
}

enum class MessageType : uint8_t {
  // Peer to master.
  kHello = 1,            // magic, version, peer_group
  kHeartbeat = 2,        // (both directions)
  kUpdateTopology = 3,   // request id, timeout (ms)
  kArePeersPending = 4,  // request id
  kOpStart = 5,          // OpKey, OpSignatures, shared-memory turns wanted (see kOpTurn)
  kOpDone = 6,           // OpKey, absl status code; text: the error
  kLeave = 7,            // (graceful goodbye)
  kSyncState = 8,        // request id, epoch, timeout (ms), SyncBallot ints; text: tensor names
  kSyncDone = 9,         // request id, epoch, absl status code; text: the error
  kOptimizeStart = 10,   // request id, epoch, timeout (ms)
  kOptimizeReport = 11,  // request id, epoch, absl status code, bytes/s from each ring member
  // Master to peer.
  kWelcome = 20,    // peer id, store port, heartbeat timeout (ms)
  kTopology = 21,   // Topology
  kReply = 22,      // request id, absl status code, value, request-specific ints; text: error
  kOpOutcome = 23,  // OpKey, absl status code; text: the error
  // OpKey, first turn. For operations whose OpStart asks for N > 0 shared-memory turns: once
  // every member started one, the master gives it the group's next N turns of the epoch
  // (counted 0, 1, ...). Each peer runs them one at a time in turn order in the group's
  // shared-memory arena, so peers that launch operations in different orders still agree which
  // one is there; a round of N all-reduces runs its own back to back in its N turns.
  kOpTurn = 24,
};

struct Message {
  MessageType type = MessageType::kHeartbeat;
  std::vector<int64_t> ints;
  std::string text;
};

// A whole frame (header included) for `message`.
std::string EncodeFrame(const Message& message);
// Parses a frame's payload (without the 8-byte header); InvalidArgument when malformed.
absl::StatusOr<Message> DecodePayload(absl::string_view payload);

// Identifies one all-reduce across peers: its peer group and that group's epoch, the user's tag
// and how many operations with that tag this peer started before in that epoch.
struct OpKey {
  int64_t group = 0;
  int64_t epoch = 0;
  int64_t tag = 0;
  int64_t instance = 0;

  template <typename H>
  friend H AbslHashValue(H h, const OpKey& k) {
    return H::combine(std::move(h), k.group, k.epoch, k.tag, k.instance);
  }
  bool operator==(const OpKey& o) const {
    return group == o.group && epoch == o.epoch && tag == o.tag && instance == o.instance;
  }
};
inline constexpr int kOpKeyInts = 4;
void AppendOpKey(const OpKey& key, std::vector<int64_t>& ints);
OpKey ReadOpKey(const std::vector<int64_t>& ints, size_t at = 0);

// What peers must agree on for an operation: count, dtype, op, quantization.
std::vector<int64_t> OpSignatureInts(const ReduceDescriptor& descriptor);
// An OpStart's signature is OpSignatureInts of each of its all-reduces (one, or a round's) and
// then how many shared-memory turns it asks for (kOpTurn): 0, or one per all-reduce. Peers must
// agree on all of it. The turns asked for; 0 for a signature of any other shape.
int64_t ArenaTurnsWanted(const std::vector<int64_t>& signature);

// A peer's view of the membership: its group, the group's epoch, the members in ring order
// (peer ids), and the global figures behind the attributes.
struct Topology {
  int64_t group = 0;
  int64_t epoch = 0;
  std::vector<int64_t> ring;
  int64_t global_world_size = 0;
  int64_t num_groups = 0;
  int64_t largest_group = 0;
};
std::vector<int64_t> TopologyInts(const Topology& topology);
absl::StatusOr<Topology> ReadTopology(const std::vector<int64_t>& ints);

// A shared-state ballot: revision, strategy, tensor count, then (count, dtype, hash, allow
// inequality) per tensor; the names go NUL-separated in the text. ReadBallot parses ints from
// `at` on (peer and description are left for the caller).
void AppendBallot(const SyncBallot& ballot, std::vector<int64_t>& ints, std::string& text);
absl::StatusOr<SyncBallot> ReadBallot(const std::vector<int64_t>& ints, size_t at,
                                      const std::string& text);

// One tensor a peer moves in a planned sync: it sends `tensor` to `peer` or receives it from
// `peer` (then `hash` is what the received bytes must hash to).
struct SyncTransfer {
  int64_t tensor = 0;
  int64_t peer = 0;
  bool receive = false;
  uint64_t hash = 0;
};
inline constexpr int kSyncTransferInts = 4;

// The status an absl code and text describe (OK for code 0).
absl::Status StatusFromWire(int64_t code, const std::string& text);

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_MASTER_PROTOCOL_H_
