#include "backends/tcp/shm_link.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/core/byte_size.h"
#include "base/core/environment.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/net/host_identity.h"

namespace plexus::tcp {
namespace {

constexpr uint32_t kShmHelloMagic = 0x53584C50;  // "PLXS"
constexpr size_t kHelloBytes = 24;
constexpr size_t kOfferBytes = 56;
constexpr size_t kSegmentHeaderBytes = 4096;  // The creator's cookie, then the ring slots.

uint64_t Fnv(uint64_t hash, const std::string& text) {
  for (char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string Namespace(const char* kind) {
  char target[256] = {};
  const ssize_t n =
      readlink(absl::StrCat("/proc/self/ns/", kind).c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

// Sends `bytes` to every peer with a socket, then reads `size` bytes from each.
absl::Status Exchange(const std::vector<Connection>& sockets, const std::vector<std::string>& out,
                      std::vector<std::string>& in, size_t size, absl::Time deadline, int rank,
                      const char* what) {
  in.assign(sockets.size(), std::string());
  for (size_t p = 0; p < sockets.size(); ++p) {
    if (!sockets[p].valid()) continue;
    if (absl::Status sent = SendAll(sockets[p].fd.get(), sockets[p].cipher.get(), out[p], deadline);
        !sent.ok()) {
      return absl::UnavailableError(absl::StrCat("rank ", rank, ": shared-memory ", what,
                                                 " to rank ", p, ": ", sent.message()));
    }
  }
  for (size_t p = 0; p < sockets.size(); ++p) {
    if (!sockets[p].valid()) continue;
    in[p].resize(size);
    if (absl::Status got =
            RecvExact(sockets[p].fd.get(), sockets[p].cipher.get(), in[p].data(), size, deadline);
        !got.ok()) {
      return absl::UnavailableError(absl::StrCat("rank ", rank, ": shared-memory ", what,
                                                 " from rank ", p, ": ", got.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShmConfig> ShmConfigFromEnvironment() {
  ShmConfig config;
  if (const char* mode = ReadEnvironment("PLEXUS_TRANSPORT"); mode != nullptr && *mode != '\0') {
    const std::string text = mode;
    if (text == "auto")
      config.mode = ShmMode::kAuto;
    else if (text == "tcp")
      config.mode = ShmMode::kOff;
    else if (text == "shm")
      config.mode = ShmMode::kRequired;
    else {
      return absl::InvalidArgumentError(absl::StrCat(
          "PLEXUS_TRANSPORT='", text, "': expected auto, tcp (no shared memory) or shm"));
    }
  }
  ASSIGN_OR_RETURN(const uint64_t ring_bytes, EnvironmentBytes("PLEXUS_SHM_RING_BYTES"));
  if (ring_bytes < 4096 || ring_bytes > (uint64_t{1} << 30) || (ring_bytes & (ring_bytes - 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("PLEXUS_SHM_RING_BYTES=", ring_bytes,
                     ": expected a power of two from 4096 (4K) to 2^30 (1G)"));
  }
  config.ring_bytes = ring_bytes;
  ASSIGN_OR_RETURN(const uint64_t arena_bytes, EnvironmentBytes("PLEXUS_SHM_ARENA_BYTES"));
  if ((arena_bytes != 0 && arena_bytes < 8192) || arena_bytes > (uint64_t{1} << 32) ||
      arena_bytes % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PLEXUS_SHM_ARENA_BYTES=", arena_bytes,
                     ": expected 0 or a multiple of 4096 from 8192 (8K) to 2^32 (4G)"));
  }
  config.arena_bytes = arena_bytes;
  if (const char* id = ReadEnvironment("PLEXUS_HOST_ID"); id != nullptr) config.host_id = id;
  return config;
}

uint64_t SharedMemoryHostKey(const std::string& host_id) {
  // The network's notion of a host (name, boot, network namespace: how tests build multi-host
  // groups on one machine), plus what mapping a peer's memory needs: /proc/<pid> showing the
  // peers (same PID namespace) and the same user. Mount namespaces do not matter (`ip netns
  // exec` makes one per process).
  uint64_t key = Fnv(1469598103934665603ull, net::NetworkHostIdentity());
  key = Fnv(key, Namespace("pid"));
  key = Fnv(key, absl::StrCat("uid ", getuid()));
  // Splits the ranks of one machine into separate hosts (testing hierarchies on one machine).
  if (!host_id.empty()) key = Fnv(key, absl::StrCat("PLEXUS_HOST_ID=", host_id));
  return key;
}

namespace {

// LinkSameHostPeers' four rounds over the sockets, with what they learn on the way.
class SameHostLinker {
 public:
  SameHostLinker(const std::vector<Connection>& sockets, int rank, const ShmConfig& config,
                 absl::Time deadline)
      : sockets_(sockets),
        size_(sockets.size()),
        rank_(rank),
        config_(config),
        deadline_(deadline),
        links_(std::make_unique<ShmLinks>()),
        why_not_(size_),
        pids_(size_, 0),
        slot_(size_, -1),
        arena_bytes_(size_, 0) {
    links_->in.resize(size_);
    links_->out.resize(size_);
    links_->segments.resize(size_);
    links_->host_of.assign(size_, 0);
  }

  absl::StatusOr<std::unique_ptr<ShmLinks>> Link() {
    if (size_ <= 1) return std::move(links_);
    RETURN_IF_ERROR(SayHello());
    RETURN_IF_ERROR(OfferSlots());
    RETURN_IF_ERROR(MapPeerSegments());
    RETURN_IF_ERROR(AgreeOnArena());
    if (links_->linked == 0) links_->own = ShmSegment();
    return std::move(links_);
  }

 private:
  absl::Status Exchange(const std::vector<std::string>& out, size_t bytes, const char* what) {
    return tcp::Exchange(sockets_, out, answers_, bytes, deadline_, rank_, what);
  }

  // 1. Who shares this host (and wants to)? Numbers the hosts and picks the candidates.
  absl::Status SayHello() {
    const uint64_t host = SharedMemoryHostKey(config_.host_id);
    std::string hello(kHelloBytes, '\0');
    absl::little_endian::Store32(hello.data(), kShmHelloMagic);
    absl::little_endian::Store32(hello.data() + 4, static_cast<uint32_t>(config_.mode));
    absl::little_endian::Store64(hello.data() + 8, host);
    absl::little_endian::Store32(hello.data() + 16, static_cast<uint32_t>(getpid()));
    RETURN_IF_ERROR(Exchange(std::vector<std::string>(size_, hello), kHelloBytes, "hello"));
    std::vector<uint64_t> host_keys(size_, host);
    for (size_t p = 0; p < size_; ++p) {
      if (sockets_[p].valid()) host_keys[p] = absl::little_endian::Load64(answers_[p].data() + 8);
    }
    for (size_t r = 0, hosts = 0; r < size_; ++r) {
      size_t first = 0;
      while (host_keys[first] != host_keys[r]) ++first;
      links_->host_of[r] = first == r ? static_cast<int>(hosts++) : links_->host_of[first];
    }
    for (size_t p = 0; p < size_; ++p) {
      if (!sockets_[p].valid()) continue;
      const char* bytes = answers_[p].data();
      if (absl::little_endian::Load32(bytes) != kShmHelloMagic) {
        return absl::UnauthenticatedError(
            absl::StrCat("rank ", rank_, ": rank ", p, " sent no shared-memory hello"));
      }
      const auto mode = static_cast<ShmMode>(absl::little_endian::Load32(bytes + 4));
      pids_[p] = static_cast<int>(absl::little_endian::Load32(bytes + 16));
      if (config_.mode == ShmMode::kOff || mode == ShmMode::kOff) {
        why_not_[p] = "PLEXUS_TRANSPORT=tcp";
      } else if (absl::little_endian::Load64(bytes + 8) != host) {
        why_not_[p] = "it runs on another host (or in another network or PID namespace)";
      } else {
        slot_[p] = candidates_++;
      }
    }
    return absl::OkStatus();
  }

  // 2. Makes this rank's segment and offers each candidate its slot there.
  absl::Status OfferSlots() {
    std::mt19937_64 random(std::random_device{}() ^ (uint64_t(getpid()) << 20));
    const uint64_t cookie = random() | 1;
    slot_bytes_ = RingSlotBytes(config_.ring_bytes);
    // Layout: cookie, the arena area (when asked for), then one ring slot per candidate.
    const size_t arena_area = config_.arena_bytes > 0 ? ArenaAreaBytes(config_.arena_bytes) : 0;
    rings_offset_ = kSegmentHeaderBytes + arena_area;
    if (candidates_ > 0) {
      auto own = ShmSegment::Create(rings_offset_ + candidates_ * slot_bytes_);
      if (own.ok()) {
        links_->own = std::move(own).value();
        absl::little_endian::Store64(links_->own.data(), cookie);
      } else {
        for (int& s : slot_) {
          if (s >= 0) s = -1;
        }
        for (std::string& reason : why_not_) {
          if (reason.empty()) reason = std::string(own.status().message());
        }
      }
    }
    std::vector<std::string> offers(size_, std::string(kOfferBytes, '\0'));
    for (size_t p = 0; p < size_; ++p) {
      char* offer = offers[p].data();
      absl::little_endian::Store32(offer, static_cast<uint32_t>(slot_[p] >= 0 ? 1 : 0));
      absl::little_endian::Store32(offer + 4, static_cast<uint32_t>(links_->own.fd()));
      absl::little_endian::Store64(offer + 8, links_->own.size());
      absl::little_endian::Store64(offer + 16, config_.ring_bytes);
      absl::little_endian::Store64(offer + 24, cookie);
      absl::little_endian::Store32(offer + 32, static_cast<uint32_t>(slot_[p]));
      absl::little_endian::Store64(offer + 40, rings_offset_);
      absl::little_endian::Store64(offer + 48, config_.arena_bytes);
    }
    return Exchange(offers, kOfferBytes, "offer");
  }

  // Maps the segment peer `p` offered and checks its cookie; "" when it worked, else why not.
  std::string MapPeer(size_t p) {
    const char* offer = answers_[p].data();
    if (absl::little_endian::Load32(offer) == 0) {
      return absl::StrCat("rank ", p, " offered no shared memory");
    }
    const int fd = static_cast<int>(absl::little_endian::Load32(offer + 4));
    const uint64_t bytes = absl::little_endian::Load64(offer + 8);
    const uint64_t ring = absl::little_endian::Load64(offer + 16);
    const uint64_t their_cookie = absl::little_endian::Load64(offer + 24);
    const uint64_t their_slot = absl::little_endian::Load32(offer + 32);
    const uint64_t their_rings = absl::little_endian::Load64(offer + 40);
    arena_bytes_[p] = absl::little_endian::Load64(offer + 48);
    if (ring == 0 || (ring & (ring - 1)) != 0 || their_rings < kSegmentHeaderBytes ||
        their_rings + (their_slot + 1) * RingSlotBytes(ring) > bytes ||
        (arena_bytes_[p] > 0 &&
         kSegmentHeaderBytes + ArenaAreaBytes(arena_bytes_[p]) > their_rings)) {
      return absl::StrCat("rank ", p, " offered a malformed segment");
    }
    auto segment = ShmSegment::OpenPeer(pids_[p], fd, bytes);
    if (!segment.ok()) return std::string(segment.status().message());
    if (absl::little_endian::Load64(segment->data()) != their_cookie) {
      return absl::StrCat("the segment of rank ", p, " did not carry its cookie");
    }
    links_->out[p] = std::make_unique<ShmRing>(
        segment->data() + their_rings + their_slot * RingSlotBytes(ring), ring);
    links_->segments[p] = std::move(segment).value();
    return "";
  }

  // 3. Maps each peer's segment and tells the peer whether that worked; a pair is linked when
  // both ends mapped the other's.
  absl::Status MapPeerSegments() {
    std::vector<std::string> results(size_, std::string(1, '\0'));
    for (size_t p = 0; p < size_; ++p) {
      if (!sockets_[p].valid() || slot_[p] < 0) continue;
      why_not_[p] = MapPeer(p);
      if (why_not_[p].empty()) results[p][0] = 1;
    }
    RETURN_IF_ERROR(Exchange(results, 1, "result"));
    // Every peer has mapped this rank's segment or given up: nobody needs the descriptor now.
    links_->own.CloseFd();
    for (size_t p = 0; p < size_; ++p) {
      if (!sockets_[p].valid()) continue;
      const bool theirs = answers_[p][0] == 1;
      if (links_->out[p] != nullptr && theirs) {
        links_->in[p] = std::make_unique<ShmRing>(
            links_->own.data() + rings_offset_ + slot_[p] * slot_bytes_, config_.ring_bytes);
        ++links_->linked;
        continue;
      }
      if (links_->out[p] != nullptr && !theirs) {
        why_not_[p] = absl::StrCat("rank ", p, " could not map this rank's segment");
      }
      links_->out[p] = nullptr;
      links_->segments[p] = ShmSegment();
      if (config_.mode == ShmMode::kRequired) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, ": PLEXUS_TRANSPORT=shm, but rank ", p,
                         " cannot be reached through shared memory: ", why_not_[p]));
      }
      if (LogEnabled(LogLevel::kDebug) && slot_[p] >= 0) {
        Log(LogLevel::kDebug,
            absl::StrCat("rank ", rank_, ": rank ", p, " over TCP: ", why_not_[p]));
      }
    }
    return absl::OkStatus();
  }

  // 4. (Every rank takes part, linked or not: the rounds must match.) An arena needs every
  // rank linked to every other with the same arena size: each rank says whether that holds
  // for it, and all decide alike from the same answers.
  absl::Status AgreeOnArena() {
    bool arena_here = config_.arena_bytes > 0 && links_->linked == static_cast<int>(size_) - 1;
    for (size_t p = 0; p < size_; ++p) {
      if (sockets_[p].valid()) arena_here &= arena_bytes_[p] == config_.arena_bytes;
    }
    const std::string said(1, arena_here ? 1 : 0);
    RETURN_IF_ERROR(Exchange(std::vector<std::string>(size_, said), 1, "arena"));
    bool arena_everywhere = arena_here;
    for (size_t p = 0; p < size_; ++p) {
      if (sockets_[p].valid()) arena_everywhere &= answers_[p][0] == 1;
    }
    if (!arena_everywhere) return absl::OkStatus();
    std::vector<uint8_t*> areas(size_);
    for (size_t p = 0; p < size_; ++p) {
      areas[p] = (static_cast<int>(p) == rank_ ? links_->own.data() : links_->segments[p].data()) +
                 kSegmentHeaderBytes;
    }
    links_->arena = std::make_unique<ShmArena>(rank_, std::move(areas), config_.arena_bytes);
    return absl::OkStatus();
  }

  const std::vector<Connection>& sockets_;
  const size_t size_;
  const int rank_;
  const ShmConfig& config_;
  const absl::Time deadline_;
  std::unique_ptr<ShmLinks> links_;
  std::vector<std::string> answers_;  // The last round's, by peer.
  std::vector<std::string> why_not_;  // Why a peer is not linked.
  std::vector<int> pids_;
  std::vector<int> slot_;  // Each candidate's ring slot in this rank's segment; -1: none.
  std::vector<uint64_t> arena_bytes_;  // Each peer's arena size, from its offer.
  int candidates_ = 0;
  size_t slot_bytes_ = 0;
  size_t rings_offset_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShmLinks>> LinkSameHostPeers(const std::vector<Connection>& sockets,
                                                            int rank, const ShmConfig& config,
                                                            absl::Time deadline) {
  return SameHostLinker(sockets, rank, config, deadline).Link();
}

}  // namespace plexus::tcp
