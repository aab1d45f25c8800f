// The tcp loop's shared-memory peers: frames from a peer on this host arrive through its ring
// (shm_ring.h), whose TCP connection then carries only doorbells and the news of the peer's end;
// frames to it go through its ring too (send_lane.cc).
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "backends/tcp/tcp_loop.h"

namespace plexus::tcp {

void Loop::DrainDoorbells(int peer_index) {
  Peer& peer = peers_[peer_index];
  char bells[256];
  while (!peer.closed) {
    const ssize_t n = recv(peer.fd.get(), bells, sizeof(bells), MSG_DONTWAIT);
    if (n > 0) {
      liveness_.Heard(peer_index);
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

ssize_t Loop::ReadStream(int peer_index, void* buffer, size_t size) {
  Peer& peer = peers_[peer_index];
  if (peer.in == nullptr) {
    const ssize_t n = peer.cipher != nullptr ? peer.cipher->Read(buffer, size)
                                             : recv(peer.fd.get(), buffer, size, MSG_DONTWAIT);
    if (n > 0) {
      liveness_.Heard(peer_index);
      ++socket_reads_;
    }
    return n;
  }
  const size_t n = peer.in->Read(buffer, size);
  if (n > 0) {
    liveness_.Heard(peer_index);
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
    if (peer.in == nullptr || !liveness_.alive(p)) continue;
    if (!peer.tx.empty()) Flush(p);
    if (liveness_.alive(p) && (peer.in->Readable() > 0 || peer.closed)) {
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
    if (peer.in == nullptr || !liveness_.alive(p)) continue;
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
