#include "base/net/frames.h"

#include <sys/socket.h>

#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

using State = FrameAtFront::State;

TEST(FramesTest, HeaderIsTheLittleEndianLengthOfThePayload) {
  const std::string frame = Framed("abc");
  ASSERT_EQ(frame.size(), kFrameLengthBytes + 3);
  EXPECT_EQ(frame.substr(0, kFrameLengthBytes), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(frame.substr(kFrameLengthBytes), "abc");
  EXPECT_EQ(Framed(""), std::string(kFrameLengthBytes, '\0'));
}

TEST(FramesTest, EveryCutShortOfTheWholeFrameIsPartial) {
  const std::string frame = Framed("payload");
  for (size_t cut = 0; cut < frame.size(); ++cut) {
    EXPECT_EQ(PeekFrame(absl::string_view(frame).substr(0, cut), 64).state, State::kPartial) << cut;
  }
  const FrameAtFront whole = PeekFrame(frame, 64);
  ASSERT_EQ(whole.state, State::kWhole);
  EXPECT_EQ(whole.payload, "payload");
  EXPECT_EQ(whole.size(), frame.size());
}

TEST(FramesTest, FramesBackToBackAreCutOneAfterAnother) {
  const std::string bytes = Framed("one") + Framed("") + Framed("three") + "\x05";
  std::vector<std::string> payloads;
  absl::string_view rest = bytes;
  for (FrameAtFront frame = PeekFrame(rest, 64); frame.state == State::kWhole;
       frame = PeekFrame(rest, 64)) {
    payloads.emplace_back(frame.payload);
    rest.remove_prefix(frame.size());
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"one", "", "three"}));
  EXPECT_EQ(rest, "\x05");
}

TEST(FramesTest, AnOversizedLengthIsRefusedFromItsHeaderAlone) {
  const std::string frame = Framed(std::string(65, 'x'));
  const FrameAtFront header_only =
      PeekFrame(absl::string_view(frame).substr(0, kFrameLengthBytes), 64);
  EXPECT_EQ(header_only.state, State::kOversized);
  EXPECT_EQ(header_only.length, 65u);
  EXPECT_EQ(PeekFrame(frame, 65).state, State::kWhole);
  EXPECT_EQ(OversizedFrame(65, 64), "a frame of 65 bytes, over the cap of 64");
}

class ReceiveFrameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    reader_.Reset(fds[0]);
    writer_.Reset(fds[1]);
  }
  void Write(const std::string& bytes) {
    ASSERT_TRUE(SendAll(writer_.get(), bytes, absl::Now() + absl::Seconds(5)).ok());
  }
  absl::StatusOr<std::string> Receive(uint64_t cap, absl::Duration within = absl::Seconds(5)) {
    return ReceiveFrame(reader_.get(), nullptr, cap, absl::Now() + within);
  }
  ScopedFd reader_, writer_;
};

TEST_F(ReceiveFrameTest, ReadsOneFrameAndLeavesTheNext) {
  Write(Framed("first") + Framed("second"));
  EXPECT_EQ(Receive(64).value(), "first");
  EXPECT_EQ(Receive(64).value(), "second");
}

TEST_F(ReceiveFrameTest, RefusesALengthOverTheCapNamingBoth) {
  Write(Framed(std::string(100, 'x')));
  const absl::StatusOr<std::string> received = Receive(10);
  EXPECT_EQ(received.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(received.status().message(), "a frame of 100 bytes, over the cap of 10");
}

TEST_F(ReceiveFrameTest, AHalfSentFrameEndsAtTheDeadline) {
  Write(Framed("whole payload").substr(0, kFrameLengthBytes + 4));
  EXPECT_EQ(Receive(64, absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ReceiveFrameTest, APeerThatClosesMidFrameIsUnavailable) {
  Write(Framed("whole payload").substr(0, 3));
  writer_.Reset();
  EXPECT_EQ(Receive(64).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace plexus
