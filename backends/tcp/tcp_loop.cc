#include "backends/tcp/tcp_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/core/deadline.h"
#include "base/core/event_journal.h"
#include "base/core/logging.h"
#include "base/work/callback_runner.h"

namespace plexus::tcp {
namespace {

// Small: whatever payload lands here is copied again, so large payloads should miss it.
constexpr size_t kRxBufferBytes = 16 * 1024;
// Payloads at least this large (with nothing buffered) are read straight into their target.
constexpr uint64_t kDirectReadBytes = 32 * 1024;
constexpr uint64_t kMaxAbortReasonBytes = 64 * 1024;
constexpr size_t kMaxRememberedOperations = 4096;

std::vector<bool> Connected(const std::vector<Connection>& peers) {
  std::vector<bool> connected(peers.size());
  for (size_t p = 0; p < peers.size(); ++p) connected[p] = peers[p].fd.valid();
  return connected;
}

}  // namespace

Loop::Loop(int rank, std::vector<Connection> peers, std::unique_ptr<ShmLinks> rings,
           std::vector<SendLane*> lanes, int epoll_fd, uint64_t max_message_bytes,
           uint64_t max_unexpected_bytes, absl::Duration heartbeat, SignatureDescriber describe)
    : rank_(rank),
      epoll_fd_(epoll_fd),
      rings_(std::move(rings)),
      max_message_bytes_(max_message_bytes),
      peers_(peers.size()),
      liveness_(rank, Connected(peers), heartbeat, absl::Now()),
      receives_(max_unexpected_bytes),
      aborted_(kMaxRememberedOperations),
      describe_(std::move(describe)),
      signatures_(kMaxRememberedOperations) {
  for (size_t i = 0; i < peers.size(); ++i) {
    peers_[i].fd = std::move(peers[i].fd);
    peers_[i].cipher = std::move(peers[i].cipher);
    peers_[i].lane = lanes[i];
    if (!peers_[i].fd.valid()) continue;
    peers_[i].rx.resize(kRxBufferBytes);
    if (rings_ != nullptr && rings_->Linked(static_cast<int>(i))) {
      peers_[i].in = rings_->in[i].get();
      peers_[i].out = rings_->out[i].get();
      peers_[i].cipher.reset();
    }
    if (peers_[i].cipher != nullptr) {
      peers_[i].cipher->ReadAhead();  // Only this cipher reads the socket from now on.
    } else {
      MutexLock lock(peers_[i].lane->mu);
      peers_[i].lane->fd = peers_[i].fd.get();
      peers_[i].lane->ring = peers_[i].out;
    }
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = i;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, peers_[i].fd.get(), &event);
  }
}

Loop::~Loop() {
  FailEverything(absl::AbortedError("transport destroyed"));
  ProgressScope progress;
  for (Finished& finished : finished_) finished.work->Complete(finished.status);
}

void Loop::TakeFinished(std::vector<Finished>& out) {
  for (Finished& finished : finished_) out.push_back(std::move(finished));
  finished_.clear();
}

std::string Loop::Describe(const Op& op) const {
  const char* what = op.kind == Op::Kind::kSend ? "send to" : "recv from";
  std::string peer = op.peer >= 0 ? absl::StrCat("rank ", op.peer) : std::string("any rank");
  return absl::StrCat(what, " ", peer, " (operation ", TagOperation(op.tag.tag), " step ",
                      op.tag.tag & ((1u << kTagStepBits) - 1), ", ", op.size, " bytes) on rank ",
                      rank_);
}

absl::Status Loop::Refusal(const Op& op) const {
  if (!broken_.ok()) return broken_;
  if (const absl::Status* aborted = aborted_.Find(TagOperation(op.tag.tag))) return *aborted;
  if (op.peer >= 0 && (op.peer >= static_cast<int>(peers_.size()) || op.peer == rank_)) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(op), ": no such peer"));
  }
  if (op.kind == Op::Kind::kSend && liveness_.departed(op.peer)) {
    return absl::UnavailableError(absl::StrCat(Describe(op), ": rank ", op.peer, " has shut down"));
  }
  return absl::OkStatus();
}

void Loop::Finish(const OpPtr& op, const absl::Status& status) {
  if (op->done) return;
  op->done = true;
  if (op->has_timer) {
    timers_.erase(op->timer);
    op->has_timer = false;
  }
  if (status.ok()) {
    if (op->kind == Op::Kind::kSend) {
      op->work->AddBytesSent(static_cast<int64_t>(op->size));
    } else {
      op->work->AddBytesReceived(static_cast<int64_t>(op->size));
      op->work->SetSourceRank(op->peer);
    }
  }
  finished_.push_back({op->work, status});
}

void Loop::Arm(const OpPtr& op) {
  op->timer = timers_.emplace(op->deadline, op);
  op->has_timer = true;
}

void Loop::PostSend(const OpPtr& op) {
  if (!op->counted) {  // Never handed to a lane: a peer that does not exist.
    absl::Status refused = Refusal(*op);
    return Finish(op, refused.ok() ? absl::InternalError("send bypassed its lane") : refused);
  }
  AdoptHanded(op->peer);  // `op` and whatever was handed before it, unless adopted already.
}

void Loop::AdoptHanded(int peer_index) {
  Peer& peer = peers_[peer_index];
  std::deque<OpPtr> handed;
  if (peer.lane != nullptr) {
    MutexLock lock(peer.lane->mu);
    handed.swap(peer.lane->handed);
  }
  const bool was_idle = peer.tx.empty();
  for (OpPtr& op : handed) {
    if (!op->loop_frame) {
      absl::Status refused = Refusal(*op);
      if (refused.ok() && !RecordSignature(*op)) refused = Refusal(*op);
      if (!refused.ok()) {
        if (op->written == 0) {
          Dequeued(*op);
          Finish(op, refused);
          continue;
        }
        ReleaseCallerBuffer(op);  // Part of it is on the wire: the rest follows from a copy.
        Finish(op, refused);
      } else {
        Arm(op);
      }
    }
    peer.tx.push_back(std::move(op));
  }
  if (was_idle && !peer.tx.empty()) Flush(peer_index);
}

void Loop::Dequeued(const Op& op) {
  if (!op.counted || op.peer < 0 || op.peer >= static_cast<int>(peers_.size())) return;
  SendLane* lane = peers_[op.peer].lane;
  if (lane == nullptr) return;
  MutexLock lock(lane->mu);
  if (lane->queued > 0) --lane->queued;
}

void Loop::QueueFrame(int peer, FrameType type, const char* what, uint64_t tag, uint64_t signature,
                      absl::string_view text) {
  auto frame = std::make_shared<Op>();
  frame->kind = Op::Kind::kSend;
  frame->peer = peer;
  frame->size = text.size();
  if (!text.empty()) {
    frame->owned.reset(new uint8_t[text.size()]);
    std::memcpy(frame->owned.get(), text.data(), text.size());
    frame->payload = frame->owned.get();
  }
  frame->work = std::make_shared<Work>(what, static_cast<int>(peers_.size()));
  EncodeHeader(frame->header, type, tag, signature, frame->size);
  frame->loop_frame = true;
  if (SendLane* lane = peers_[peer].lane; lane != nullptr) {
    MutexLock lock(lane->mu);
    ++lane->queued;
    frame->counted = true;
    lane->handed.push_back(frame);
  } else {
    peers_[peer].tx.push_back(frame);
    if (peers_[peer].tx.size() == 1) Flush(peer);
  }
  AdoptHanded(peer);
}

void Loop::CloseLane(int peer) {
  if (SendLane* lane = peers_[peer].lane; lane != nullptr) {
    MutexLock lock(lane->mu);
    lane->fd = -1;
  }
}

void Loop::Flush(int peer_index) {
  Peer& peer = peers_[peer_index];
  std::vector<OpPtr> finished;
  absl::Status failure;
  {
    // Held while writing so a caller's direct write cannot interleave with ours.
    UniqueLock lock(peer.lane->mu);
    if (peer.CipherPending() && peer.cipher->Flush() < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK && errno != EINTR) {
      failure = absl::UnavailableError(absl::StrCat("send failed: ", strerror(errno)));
    }
    while (!peer.tx.empty() && liveness_.alive(peer_index) && failure.ok() &&
           !peer.CipherPending()) {
      const OpPtr& op = peer.tx.front();
      if (op->done && op->written == 0) {  // Timed out or aborted before a byte left.
        if (op->counted && peer.lane->queued > 0) --peer.lane->queued;
        peer.tx.pop_front();
        continue;
      }
      ssize_t n = WriteFrame(peer.fd.get(), peer.out, peer.cipher.get(), *op);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0) {
        failure = absl::UnavailableError(absl::StrCat("send failed: ", strerror(errno)));
        break;
      }
      op->written += static_cast<uint64_t>(n);
      if (op->written == kFrameHeaderBytes + op->size) {
        if (op->counted && peer.lane->queued > 0) --peer.lane->queued;
        finished.push_back(op);
        peer.tx.pop_front();
      }
    }
  }
  // Completion callbacks run without the lane lock: they may send again.
  for (const OpPtr& op : finished) Finish(op, absl::OkStatus());
  if (!failure.ok()) return PeerLost(peer_index, std::string(failure.message()));
  if (liveness_.alive(peer_index)) {
    SetWantWrite(peer_index, !peer.tx.empty() || peer.CipherPending());
  }
}

void Loop::SetWantWrite(int peer_index, bool want) {
  Peer& peer = peers_[peer_index];
  if (peer.want_write == want || !liveness_.alive(peer_index)) return;
  peer.want_write = want;
  if (peer.out != nullptr) return;  // Room in a ring is signalled by doorbell, not EPOLLOUT.
  epoll_event event{};
  event.events = static_cast<uint32_t>(EPOLLIN) | (want ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  event.data.u64 = static_cast<uint64_t>(peer_index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, peer.fd.get(), &event);
}

bool Loop::Matches(const OpPtr& op, int peer, uint64_t size, uint64_t signature) {
  if (op->tag.signature != 0 && signature != 0 && op->tag.signature != signature) {
    Mismatch(TagOperation(op->tag.tag), peer, signature, op->tag.signature);
    return false;
  }
  if (size == op->size) return true;
  op->peer = peer;
  Finish(op,
         absl::FailedPreconditionError(absl::StrCat(Describe(*op), ": rank ", peer, " sent ", size,
                                                    " bytes but this rank expected ", op->size)));
  return false;
}

bool Loop::RecordSignature(const Op& op) {
  if (op.tag.signature == 0) return true;
  const uint64_t operation = TagOperation(op.tag.tag);
  signatures_.Remember(operation, op.tag.signature);
  if (const StagedMessage* early = receives_.Disagreeing(operation, op.tag.signature)) {
    Mismatch(operation, early->peer, early->signature, op.tag.signature);
    return false;
  }
  return true;
}

void Loop::Mismatch(uint64_t operation, int peer, uint64_t theirs, uint64_t ours) {
  AbortOperation(operation,
                 absl::FailedPreconditionError(absl::StrCat(
                     "ranks disagree on the collective: rank ", rank_, " is running ",
                     describe_(ours), " but rank ", peer, " is running ", describe_(theirs))),
                 /*notify_peers=*/true);
}

void Loop::PostRecv(const OpPtr& op) {
  if (absl::Status refused = Refusal(*op); !refused.ok()) return Finish(op, refused);
  if (!RecordSignature(*op)) return Finish(op, Refusal(*op));
  Arm(op);
  // A message that already arrived (or is arriving) is matched first, in arrival order.
  if (StagedPtr staged = receives_.FindStaged(*op); staged != nullptr) {
    if (!staged->complete) {
      staged->waiter = op;
      op->peer = staged->peer;
      return;
    }
    receives_.Unstage(staged);
    return Deliver(op, staged);
  }
  if (op->kind == Op::Kind::kRecv && liveness_.departed(op->peer)) {
    return Finish(op, absl::UnavailableError(
                          absl::StrCat(Describe(*op), ": rank ", op->peer, " has shut down")));
  }
  receives_.Wait(op);
}

void Loop::Deliver(const OpPtr& op, const StagedPtr& staged) {
  if (Matches(op, staged->peer, staged->size, staged->signature)) {
    op->peer = staged->peer;
    if (staged->size > 0) std::memcpy(op->data, staged->bytes.get(), staged->size);
    Finish(op, absl::OkStatus());
  }
  receives_.Recycle(*staged);
}

void Loop::OnEvent(int peer, uint32_t events) {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !liveness_.alive(peer)) return;
  if (peers_[peer].in != nullptr) {
    DrainDoorbells(peer);
    if (!peers_[peer].tx.empty()) Flush(peer);
    // Everything the ring holds counts before a closed socket does (a goodbye may be in it).
    if (liveness_.alive(peer)) OnReadable(peer);
    return;
  }
  if (events & EPOLLOUT) Flush(peer);
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) OnReadable(peer);
}

bool Loop::ReadNow(int peer) {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !liveness_.alive(peer) ||
      peers_[peer].in != nullptr) {
    return false;
  }
  const uint64_t reads_before = socket_reads_;
  OnReadable(peer);
  return socket_reads_ != reads_before;
}

void Loop::OnReadable(int peer_index) {
  Peer& peer = peers_[peer_index];
  // A short read means the socket was empty a moment ago; epoll (level-triggered) reports it
  // again when more arrives, so skip the recv that would only say EAGAIN.
  bool drained = false;
  while (liveness_.alive(peer_index)) {
    if (peer.rx_begin < peer.rx_end) {
      if (!ProcessBuffered(peer_index)) return;
      continue;
    }
    if (drained) return;
    peer.rx_begin = peer.rx_end = 0;
    ssize_t n;
    if (peer.in_payload && peer.target != nullptr && peer.payload_left >= kDirectReadBytes) {
      const uint64_t wanted = peer.payload_left;
      n = ReadStream(peer_index, peer.target, wanted);
      if (n > 0) {
        drained = static_cast<uint64_t>(n) < wanted;
        peer.target += n;
        peer.payload_left -= static_cast<uint64_t>(n);
        if (peer.payload_left == 0) FinishFrame(peer_index);
        continue;
      }
    } else {
      n = ReadStream(peer_index, peer.rx.data(), peer.rx.size());
      if (n > 0) {
        drained = static_cast<size_t>(n) < peer.rx.size();
        peer.rx_end = static_cast<size_t>(n);
        continue;
      }
    }
    if (n == 0) return PeerLost(peer_index, "connection closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return PeerLost(peer_index, ReadFailure(peer));
  }
}

bool Loop::ProcessBuffered(int peer_index) {
  Peer& peer = peers_[peer_index];
  while (liveness_.alive(peer_index) && peer.rx_begin < peer.rx_end) {
    const size_t available = peer.rx_end - peer.rx_begin;
    if (!peer.in_payload) {
      if (available < kFrameHeaderBytes) {
        // Keep the partial header at the front and read more behind it.
        std::memmove(peer.rx.data(), peer.rx.data() + peer.rx_begin, available);
        peer.rx_begin = 0;
        peer.rx_end = available;
        ssize_t n = ReadStream(peer_index, peer.rx.data() + available, peer.rx.size() - available);
        if (n > 0) {
          peer.rx_end += static_cast<size_t>(n);
          continue;
        }
        if (n == 0) {
          PeerLost(peer_index, "connection closed");
          return false;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
        PeerLost(peer_index, ReadFailure(peer));
        return false;
      }
      const char* header = reinterpret_cast<const char*>(peer.rx.data() + peer.rx_begin);
      peer.rx_begin += kFrameHeaderBytes;
      if (!StartFrame(peer_index, header)) return false;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(peer.payload_left, available);
    if (peer.type == FrameType::kAbort) {
      peer.abort_text.append(reinterpret_cast<const char*>(peer.rx.data() + peer.rx_begin), n);
    } else if (peer.target != nullptr) {
      std::memcpy(peer.target, peer.rx.data() + peer.rx_begin, n);
      peer.target += n;
    }
    peer.rx_begin += n;
    peer.payload_left -= n;
    if (peer.payload_left == 0) FinishFrame(peer_index);
  }
  return liveness_.alive(peer_index);
}

bool Loop::StartFrame(int peer_index, const char* header) {
  Peer& peer = peers_[peer_index];
  const FrameHeader frame = DecodeHeader(header);
  const uint32_t type = frame.type;
  peer.tag = frame.tag;
  peer.signature = frame.signature;
  const uint64_t size = frame.size;
  peer.in_payload = true;
  peer.payload_left = size;
  peer.target = nullptr;
  if (type == static_cast<uint32_t>(FrameType::kAbort)) {
    if (size > kMaxAbortReasonBytes) {
      PeerLost(peer_index, absl::StrCat("abort frame of ", size, " bytes"));
      return false;
    }
    peer.type = FrameType::kAbort;
    peer.abort_text.clear();
  } else if (type == static_cast<uint32_t>(FrameType::kGoodbye)) {
    PeerDeparted(peer_index);
    return false;
  } else if (type == static_cast<uint32_t>(FrameType::kHeartbeat)) {
    if (size != 0) {
      PeerLost(peer_index, absl::StrCat("heartbeat frame with ", size, " bytes of payload"));
      return false;
    }
    peer.in_payload = false;  // Arriving was all it had to do.
    return true;
  } else if (type == static_cast<uint32_t>(FrameType::kData)) {
    if (!StartDataFrame(peer_index, size)) return false;
  } else {
    PeerLost(peer_index, absl::StrCat("unknown frame type ", type));
    return false;
  }
  if (size == 0) FinishFrame(peer_index);
  return true;
}

bool Loop::StartDataFrame(int peer_index, uint64_t size) {
  Peer& peer = peers_[peer_index];
  if (size > max_message_bytes_) {
    PeerLost(peer_index,
             absl::StrCat("frame of ", size, " bytes exceeds the cap of ", max_message_bytes_));
    return false;
  }
  peer.type = FrameType::kData;
  const uint64_t operation = TagOperation(peer.tag);
  if (const uint64_t* ours = signatures_.Find(operation); peer.signature != 0 && ours != nullptr &&
                                                          *ours != peer.signature &&
                                                          !aborted_.Contains(operation)) {
    Mismatch(operation, peer_index, peer.signature, *ours);
  }
  if (aborted_.Contains(operation)) return true;  // A message of an aborted operation: dropped.
  if (OpPtr op = receives_.TakeWaiting(peer_index, peer.tag); op != nullptr) {
    if (Matches(op, peer_index, size, peer.signature)) {
      op->receiving = true;
      peer.rx_op = op;
      peer.target = op->data;
    }
    return true;
  }
  auto staged = receives_.Stage(peer_index, peer.tag, peer.signature, size);
  if (!staged.ok()) {
    PeerLost(peer_index, std::string(staged.status().message()));
    return false;
  }
  peer.rx_staged = *staged;
  peer.target = peer.rx_staged->bytes.get();
  return true;
}

void Loop::FinishFrame(int peer_index) {
  Peer& peer = peers_[peer_index];
  peer.in_payload = false;
  peer.target = nullptr;
  if (peer.type == FrameType::kAbort) {
    const auto code = static_cast<absl::StatusCode>(peer.signature);
    AbortOperation(peer.tag,
                   absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kAborted : code,
                                peer.abort_text),
                   /*notify_peers=*/false);
    return;
  }
  if (peer.rx_op != nullptr) {
    OpPtr op = std::move(peer.rx_op);
    op->receiving = false;
    Finish(op, absl::OkStatus());
  }
  if (peer.rx_staged != nullptr) {
    StagedPtr staged = std::move(peer.rx_staged);
    staged->complete = true;
    if (staged->waiter != nullptr && !staged->waiter->done) {
      receives_.Unstage(staged);
      OpPtr waiter = std::move(staged->waiter);
      Deliver(waiter, staged);
    }
  }
}

void Loop::AbortOperation(uint64_t operation, const absl::Status& reason, bool notify_peers) {
  aborted_.Remember(operation, reason);
  std::vector<OpPtr> victims = receives_.DropOperation(operation);
  for (Peer& peer : peers_) {
    for (const OpPtr& op : peer.tx) {
      if (TagOperation(op->tag.tag) == operation) victims.push_back(op);
    }
    if (peer.rx_op != nullptr && TagOperation(peer.rx_op->tag.tag) == operation) {
      victims.push_back(peer.rx_op);
    }
    if (peer.rx_staged != nullptr && TagOperation(peer.rx_staged->tag) == operation) {
      peer.rx_staged = nullptr;
      peer.target = nullptr;
    }
  }
  for (const OpPtr& op : victims) {
    ReleaseCallerBuffer(op);
    Finish(op, reason);
  }
  if (!notify_peers) return;
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    if (!liveness_.alive(p)) continue;
    QueueFrame(p, FrameType::kAbort, "abort", operation, static_cast<uint64_t>(reason.code()),
               reason.message());
  }
}

void Loop::ReleaseCallerBuffer(const OpPtr& op) {
  if (op->done) return;
  if (op->kind == Op::Kind::kSend && op->written > 0) {
    // Part of the frame is on the wire: finish it from a copy so the stream stays whole.
    op->owned.reset(new uint8_t[op->size]);
    std::memcpy(op->owned.get(), op->payload, op->size);
    op->payload = op->owned.get();
  }
  if (op->receiving && op->peer >= 0 && peers_[op->peer].rx_op == op) {
    peers_[op->peer].rx_op = nullptr;
    peers_[op->peer].target = nullptr;  // Drain the rest of the payload.
  }
}

void Loop::PeerLost(int peer_index, const std::string& reason) {
  if (!liveness_.MarkLost(peer_index)) return;
  Peer& peer = peers_[peer_index];
  const bool mid_frame = peer.in_payload;
  CloseLane(peer_index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  peer.fd.Reset();
  const std::string lost =
      absl::StrCat("tcp transport rank ", rank_, ": lost rank ", peer_index, ": ", reason);
  NoteEvent("peer_lost", lost);
  if (broken_.ok()) {
    broken_ = absl::UnavailableError(
        absl::StrCat("rank ", rank_, " lost rank ", peer_index, ": ", reason));
  }
  const int failed = FailEverything(broken_);
  // torch leaves groups to process exit, so peers that finished close between operations
  // without a goodbye: a warning only where something was waiting on them (later operations
  // fail with the loss either way).
  if (failed > 0 || mid_frame) {
    Log(LogLevel::kWarning, lost);
  } else {
    Log(LogLevel::kInfo, absl::StrCat(lost, " (between operations)"));
  }
}

void Loop::PeerDeparted(int peer_index) {
  Peer& peer = peers_[peer_index];
  liveness_.MarkDeparted(peer_index);
  CloseLane(peer_index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, peer.fd.get(), nullptr);
  peer.fd.Reset();
  const absl::Status gone =
      absl::UnavailableError(absl::StrCat("rank ", peer_index, " has shut down"));
  NoteEvent("peer_departed",
            absl::StrCat("tcp transport rank ", rank_, ": rank ", peer_index, " has shut down"));
  // The arena is not broken here: a rank leaving marked itself failed there (Leave), and a
  // failure that made it leave is this rank's to see for itself (naming the lost rank).
  std::vector<OpPtr> victims(peer.tx.begin(), peer.tx.end());
  peer.tx.clear();
  // Receives from anyone wait on as long as some peer can still send.
  const std::vector<OpPtr> waiting = receives_.DropWaitingFor(peer_index, !liveness_.AnyoneAlive());
  victims.insert(victims.end(), waiting.begin(), waiting.end());
  for (const OpPtr& op : victims) {
    Finish(op, absl::UnavailableError(absl::StrCat(Describe(*op), ": ", gone.message())));
  }
}

void Loop::SayGoodbye() {
  if (rings_ != nullptr && rings_->arena != nullptr) rings_->arena->Leave();
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    if (liveness_.alive(p)) QueueFrame(p, FrameType::kGoodbye, "goodbye");
  }
}

bool Loop::Drained() const {
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    const Peer& peer = peers_[p];
    if (liveness_.alive(p) && (!peer.tx.empty() || peer.CipherPending())) return false;
  }
  return true;
}

void Loop::AbortAll(const absl::Status& reason) {
  if (broken_.ok()) broken_ = reason;
  FailEverything(broken_);
}

void Loop::BreakArena(const absl::Status& status) {
  if (rings_ != nullptr && rings_->arena != nullptr) rings_->arena->Break(status);
}

int Loop::FailEverything(const absl::Status& status) {
  BreakArena(status);
  std::vector<OpPtr> victims = receives_.DropAll();
  for (int p = 0; p < static_cast<int>(peers_.size()); ++p) {
    Peer& peer = peers_[p];
    CloseLane(p);  // The transport is broken: every later send goes through Refusal().
    if (peer.lane != nullptr) {
      MutexLock lock(peer.lane->mu);
      peer.lane->queued = 0;
    }
    victims.insert(victims.end(), peer.tx.begin(), peer.tx.end());
    peer.tx.clear();
    if (peer.rx_op != nullptr) victims.push_back(peer.rx_op);
    peer.rx_op = nullptr;
    peer.rx_staged = nullptr;
    peer.target = nullptr;
  }
  for (const OpPtr& op : victims) Finish(op, status);
  return static_cast<int>(victims.size());
}

void Loop::ExpireDeadlines(absl::Time now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    OpPtr op = timers_.begin()->second;
    ReleaseCallerBuffer(op);
    Finish(op, absl::DeadlineExceededError(absl::StrCat(Describe(*op), " timed out after ",
                                                        absl::FormatDuration(op->timeout))));
  }
  if (now >= liveness_.next_check()) CheckHeartbeats(now);
}

void Loop::CheckHeartbeats(absl::Time now) {
  const PeerLiveness::Verdict verdict =
      liveness_.Check(now, [this](int p) { return !peers_[p].tx.empty(); });
  for (const auto& [peer, why] : verdict.silent) PeerLost(peer, why);
  for (int peer : verdict.beat) QueueFrame(peer, FrameType::kHeartbeat, "heartbeat");
}

int MillisecondsUntil(absl::Time deadline, absl::Time now) {
  const absl::Duration left = deadline - now;
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 0, 1000));
}

int Loop::NextTimeoutMs(absl::Time now) const {
  const absl::Time next = timers_.empty()
                              ? liveness_.next_check()
                              : std::min(liveness_.next_check(), timers_.begin()->first);
  return next == absl::InfiniteFuture() ? 1000 : MillisecondsUntil(next, now);
}

}  // namespace plexus::tcp
