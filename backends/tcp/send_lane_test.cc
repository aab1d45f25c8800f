// Send lanes without a loop: an idle lane writes the whole frame on the caller's thread (to a
// socket or a shared-memory ring); a busy or closed lane, or a socket that fills mid-frame,
// hands the frame to the loop with what already left counted in `written`.
#include "backends/tcp/send_lane.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

struct SocketPair {
  int ours = -1;
  int theirs = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours = fds[0];
    theirs = fds[1];
    fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK);
  }
  ~SocketPair() {
    close(ours);
    close(theirs);
  }
  // Reads exactly `size` bytes (or what there is) without blocking.
  std::vector<char> Take(size_t size) const {
    std::vector<char> out(size);
    size_t got = 0;
    while (got < size) {
      const ssize_t n = recv(theirs, out.data() + got, size - got, MSG_DONTWAIT);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    return out;
  }
};

OpPtr Frame(const std::vector<uint8_t>& payload, uint64_t tag) {
  auto op = std::make_shared<Op>();
  op->kind = Op::Kind::kSend;
  op->peer = 1;
  op->tag.tag = tag;
  op->size = payload.size();
  op->data = const_cast<uint8_t*>(payload.data());
  op->payload = payload.data();
  EncodeHeader(op->header, FrameType::kData, tag, 0, payload.size());
  return op;
}

TEST(SendLaneTest, AnIdleLaneWritesTheWholeFrameOnTheCallersThread) {
  SocketPair pair;
  SendLane lane;
  lane.fd = pair.ours;
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  OpPtr op = Frame(payload, 42);
  EXPECT_TRUE(TrySendDirect(lane, op));
  EXPECT_EQ(op->written, kFrameHeaderBytes + payload.size());
  EXPECT_EQ(lane.queued, 0);
  EXPECT_TRUE(lane.handed.empty());
  const std::vector<char> wire = pair.Take(kFrameHeaderBytes + payload.size() + 1);
  ASSERT_EQ(wire.size(), kFrameHeaderBytes + payload.size());
  const FrameHeader header = DecodeHeader(wire.data());
  EXPECT_EQ(header.tag, 42u);
  EXPECT_EQ(header.size, payload.size());
  EXPECT_EQ(std::memcmp(wire.data() + kFrameHeaderBytes, payload.data(), payload.size()), 0);
}

TEST(SendLaneTest, ABusyOrClosedLaneHandsTheFrameToTheLoopUntouched) {
  SocketPair pair;
  SendLane lane;
  lane.fd = pair.ours;
  lane.queued = 1;  // A frame of the loop's is ahead: this one must not overtake it.
  const std::vector<uint8_t> payload(100, 7);
  OpPtr behind = Frame(payload, 1);
  EXPECT_FALSE(TrySendDirect(lane, behind));
  EXPECT_EQ(behind->written, 0u);
  EXPECT_TRUE(behind->counted);
  EXPECT_EQ(lane.queued, 2);
  ASSERT_EQ(lane.handed.size(), 1u);
  EXPECT_EQ(lane.handed.front(), behind);
  EXPECT_TRUE(pair.Take(1).empty());

  SendLane closed;  // fd -1: the peer is gone or the transport broken.
  OpPtr refused = Frame(payload, 2);
  EXPECT_FALSE(TrySendDirect(closed, refused));
  EXPECT_EQ(closed.queued, 1);
  EXPECT_EQ(refused->written, 0u);
}

TEST(SendLaneTest, AFullSocketLeavesTheRestOfTheFrameToTheLoop) {
  SocketPair pair;
  int small = 4096;
  setsockopt(pair.ours, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  SendLane lane;
  lane.fd = pair.ours;
  const std::vector<uint8_t> payload(8 << 20, 3);
  OpPtr op = Frame(payload, 9);
  EXPECT_FALSE(TrySendDirect(lane, op));
  EXPECT_GT(op->written, 0u);
  EXPECT_LT(op->written, kFrameHeaderBytes + payload.size());
  EXPECT_EQ(lane.queued, 1);
  // The loop goes on from `written`: the peer ends up with the frame, byte for byte.
  std::vector<char> wire = pair.Take(op->written);
  while (op->written < kFrameHeaderBytes + payload.size()) {
    const ssize_t n = WriteFrame(lane.fd, nullptr, nullptr, *op);
    if (n > 0) op->written += static_cast<uint64_t>(n);
    const std::vector<char> more = pair.Take(1 << 20);
    wire.insert(wire.end(), more.begin(), more.end());
  }
  const std::vector<char> rest = pair.Take(1 << 20);
  wire.insert(wire.end(), rest.begin(), rest.end());
  ASSERT_EQ(wire.size(), kFrameHeaderBytes + payload.size());
  EXPECT_EQ(DecodeHeader(wire.data()).size, payload.size());
  EXPECT_EQ(std::memcmp(wire.data() + kFrameHeaderBytes, payload.data(), payload.size()), 0);
}

TEST(SendLaneTest, APeerOnThisHostGetsTheFrameThroughItsRingAndADoorbell) {
  constexpr uint64_t kCapacity = 1 << 16;
  auto segment = ShmSegment::Create(RingSlotBytes(kCapacity));
  ASSERT_TRUE(segment.ok()) << segment.status();
  ShmRing ring(segment->data(), kCapacity);
  ASSERT_TRUE(ring.PrepareToSleep());  // The reader sleeps: the writer must ring.
  SocketPair pair;
  SendLane lane;
  lane.fd = pair.ours;
  lane.ring = &ring;
  const std::vector<uint8_t> payload(1000, 9);
  EXPECT_TRUE(TrySendDirect(lane, Frame(payload, 5)));
  EXPECT_EQ(pair.Take(2).size(), 1u);  // One doorbell byte, no frame bytes on the socket.
  ring.Awake();
  std::vector<char> wire(kFrameHeaderBytes + payload.size());
  ASSERT_EQ(ring.Read(wire.data(), wire.size()), wire.size());
  EXPECT_EQ(DecodeHeader(wire.data()).tag, 5u);
  EXPECT_EQ(std::memcmp(wire.data() + kFrameHeaderBytes, payload.data(), payload.size()), 0);
}

}  // namespace
}  // namespace plexus::tcp
