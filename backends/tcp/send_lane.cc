#include "backends/tcp/send_lane.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

namespace plexus::tcp {

void RingDoorbell(int fd) {
  // A full socket buffer means earlier doorbells are still unread: the peer wakes anyway.
  const char bell = 0;
  [[maybe_unused]] ssize_t n = send(fd, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool TrySendDirect(SendLane& lane, const OpPtr& op) {
  MutexLock lock(lane.mu);
  if (lane.fd >= 0 && lane.queued == 0) {
    while (op->written < kFrameHeaderBytes + op->size) {
      ssize_t n = WriteFrame(lane.fd, lane.ring, nullptr, *op);
      if (n > 0) {
        op->written += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EAGAIN, or an error the loop will see on its side.
    }
    if (op->written == kFrameHeaderBytes + op->size) return true;
  }
  ++lane.queued;
  op->counted = true;
  lane.handed.push_back(op);
  return false;
}

ssize_t WriteFrame(int fd, ShmRing* ring, StreamCipher* cipher, Op& op) {
  iovec iov[2];
  int count = 0;
  if (op.written < kFrameHeaderBytes) {
    iov[count++] = {op.header + op.written, kFrameHeaderBytes - op.written};
    if (op.size > 0) iov[count++] = {const_cast<uint8_t*>(op.payload), op.size};
  } else {
    const uint64_t offset = op.written - kFrameHeaderBytes;
    iov[count++] = {const_cast<uint8_t*>(op.payload) + offset, op.size - offset};
  }
  if (ring == nullptr) {
    if (cipher != nullptr) return cipher->Write(iov, count);
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    return sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  size_t n = ring->Write(iov, count);
  if (n == 0 && ring->WaitForSpace()) n = ring->Write(iov, count);
  if (n == 0) {
    errno = EAGAIN;
    return -1;
  }
  if (ring->ReaderNeedsWake()) RingDoorbell(fd);
  return static_cast<ssize_t>(n);
}

}  // namespace plexus::tcp
