// The ring alone: bytes arrive intact and in order through wrap-around, and the sleep/wake
// handshake loses no wake-up (a lost one shows as a poll that times out).
#include "backends/tcp/shm_ring.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace plexus::tcp {
namespace {

void Ring(int fd) {
  const char bell = 0;
  ASSERT_EQ(send(fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL), 1);
}

// Sleeps on `fd` for at most 2 s; drains it. False if nothing came.
bool Sleep(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 2000) != 1) return false;
  char bells[64];
  while (recv(fd, bells, sizeof(bells), MSG_DONTWAIT) > 0) {
  }
  return true;
}

TEST(ShmRingTest, SegmentIsZeroedAndOpenableByPid) {
  auto own = ShmSegment::Create(RingSlotBytes(4096));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->data()[100], 0);
  own->data()[100] = 42;
  auto again = ShmSegment::OpenPeer(getpid(), own->fd(), own->size());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->data()[100], 42);
  EXPECT_FALSE(ShmSegment::OpenPeer(getpid(), own->fd(), own->size() + 1).ok());
  own->CloseFd();
  EXPECT_EQ(own->data()[100], 42);
}

TEST(ShmRingTest, StreamsBytesInOrderAndNeverLosesAWakeUp) {
  constexpr uint64_t kCapacity = 4096;
  auto segment = ShmSegment::Create(RingSlotBytes(kCapacity));
  ASSERT_TRUE(segment.ok());
  int bells[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, bells), 0);
  constexpr size_t kTotal = 8 << 20;
  std::atomic<int> writer_timeouts{0};
  std::thread writer([&] {
    ShmRing ring(segment->data(), kCapacity);
    std::mt19937 random(1);
    std::vector<uint8_t> chunk(3 * kCapacity);
    size_t sent = 0;
    while (sent < kTotal) {
      const size_t size = std::min<size_t>(kTotal - sent, 1 + random() % chunk.size());
      for (size_t i = 0; i < size; ++i) chunk[i] = static_cast<uint8_t>((sent + i) * 7);
      iovec iov[2] = {{chunk.data(), size / 2}, {chunk.data() + size / 2, size - size / 2}};
      size_t done = 0;
      while (done < size) {
        iovec rest[2];
        int count = 0;
        size_t skip = done;
        for (const iovec& v : iov) {
          if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
          }
          rest[count++] = {static_cast<uint8_t*>(v.iov_base) + skip, v.iov_len - skip};
          skip = 0;
        }
        size_t n = ring.Write(rest, count);
        if (n == 0 && !ring.WaitForSpace()) {
          if (!Sleep(bells[0])) ++writer_timeouts;
          continue;
        }
        if (n > 0 && ring.ReaderNeedsWake()) Ring(bells[0]);
        done += n;
      }
      sent += size;
    }
  });
  ShmRing ring(segment->data(), kCapacity);
  std::vector<uint8_t> buffer(5000);
  size_t received = 0;
  int reader_timeouts = 0;
  bool intact = true;
  while (received < kTotal) {
    const size_t n = ring.Read(buffer.data(), buffer.size());
    if (n == 0) {
      if (ring.PrepareToSleep()) {
        if (!Sleep(bells[1])) ++reader_timeouts;
        ring.Awake();
      }
      continue;
    }
    if (ring.WriterNeedsWake()) Ring(bells[1]);
    for (size_t i = 0; i < n; ++i) {
      intact &= buffer[i] == static_cast<uint8_t>((received + i) * 7);
    }
    received += n;
  }
  writer.join();
  EXPECT_TRUE(intact);
  EXPECT_EQ(reader_timeouts, 0);
  EXPECT_EQ(writer_timeouts.load(), 0);
  close(bells[0]);
  close(bells[1]);
}

}  // namespace
}  // namespace plexus::tcp
