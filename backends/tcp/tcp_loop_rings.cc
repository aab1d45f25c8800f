// The tcp loop's byte streams: frames go to a peer's socket (in the clear or through its TLS
// cipher) or, for a peer on this host, through shared-memory rings (shm_ring.h), whose TCP
// connection then carries only doorbells and the news of the peer's end.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "backends/tcp/tcp_loop.h"

namespace plexus::tcp {

void RingDoorbell(int fd) {
  // A full socket buffer means earlier doorbells are still unread: the peer wakes anyway.
  const char bell = 0;
  [[maybe_unused]] ssize_t n = send(fd, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool TrySendDirect(SendLane& lane, const OpPtr& op) {
  std::lock_guard<std::mutex> lock(lane.mu);
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

void Loop::DrainDoorbells(int peer_index) {
  Peer& peer = peers_[peer_index];
  char bells[256];
  while (!peer.closed) {
    const ssize_t n = recv(peer.fd.get(), bells, sizeof(bells), MSG_DONTWAIT);
    if (n > 0) {
      peer.heard = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    peer.closed = true;  // End of file or a reset: the process is gone.
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  }
}

std::string Loop::ReadFailure(const Peer& peer) {
  if (peer.cipher != nullptr && errno == EPROTO) return "TLS: " + peer.cipher->LastError();
  return absl::StrCat("recv failed: ", strerror(errno));
}

ssize_t Loop::ReadStream(Peer& peer, void* buffer, size_t size) {
  if (peer.in == nullptr) {
    const ssize_t n = peer.cipher != nullptr ? peer.cipher->Read(buffer, size)
                                             : recv(peer.fd.get(), buffer, size, MSG_DONTWAIT);
    if (n > 0) {
      peer.heard = true;
      ++socket_reads_;
    }
    return n;
  }
  const size_t n = peer.in->Read(buffer, size);
  if (n > 0) {
    peer.heard = true;
    if (peer.in->WriterNeedsWake()) RingDoorbell(peer.fd.get());
    return static_cast<ssize_t>(n);
  }
  if (peer.closed) return 0;
  errno = EAGAIN;
  return -1;
}

int Loop::PollRings() {
  if (rings_ == nullptr) return 0;
  int active = 0;
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    Peer& peer = peers_[p];
    if (peer.in == nullptr || !peer.alive) continue;
    if (!peer.tx.empty()) Flush(p);
    if (peer.alive && (peer.in->Readable() > 0 || peer.closed)) {
      ++active;
      OnReadable(p);
    }
  }
  return active;
}

bool Loop::PrepareToSleep() {
  if (rings_ == nullptr) return true;
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    Peer& peer = peers_[p];
    if (peer.in == nullptr || !peer.alive) continue;
    if (!peer.in->PrepareToSleep() || peer.closed) {
      Awake();
      return false;
    }
  }
  return true;
}

void Loop::Awake() {
  if (rings_ == nullptr) return;
  for (Peer& peer : peers_) {
    if (peer.in != nullptr) peer.in->Awake();
  }
}

}  // namespace plexus::tcp
