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

absl::StatusOr<std::unique_ptr<ShmLinks>> LinkSameHostPeers(const std::vector<Connection>& sockets,
                                                            int rank, const ShmConfig& config,
                                                            absl::Time deadline) {
  const size_t size = sockets.size();
  auto links = std::make_unique<ShmLinks>();
  links->in.resize(size);
  links->out.resize(size);
  links->segments.resize(size);
  links->host_of.assign(size, 0);
  if (size <= 1) return links;
  // 1. Who shares this host (and wants to)?
  const uint64_t host = SharedMemoryHostKey(config.host_id);
  std::string hello(kHelloBytes, '\0');
  absl::little_endian::Store32(hello.data(), kShmHelloMagic);
  absl::little_endian::Store32(hello.data() + 4, static_cast<uint32_t>(config.mode));
  absl::little_endian::Store64(hello.data() + 8, host);
  absl::little_endian::Store32(hello.data() + 16, static_cast<uint32_t>(getpid()));
  std::vector<std::string> answers;
  RETURN_IF_ERROR(Exchange(sockets, std::vector<std::string>(size, hello), answers, kHelloBytes,
                           deadline, rank, "hello"));
  std::vector<uint64_t> host_keys(size, host);
  for (size_t p = 0; p < size; ++p) {
    if (sockets[p].valid()) host_keys[p] = absl::little_endian::Load64(answers[p].data() + 8);
  }
  for (size_t r = 0, hosts = 0; r < size; ++r) {
    size_t first = 0;
    while (host_keys[first] != host_keys[r]) ++first;
    links->host_of[r] = first == r ? static_cast<int>(hosts++) : links->host_of[first];
  }
  std::vector<std::string> why_not(size);
  std::vector<int> pids(size, 0);
  std::vector<int> slot(size, -1);
  int candidates = 0;
  for (size_t p = 0; p < size; ++p) {
    if (!sockets[p].valid()) continue;
    const char* bytes = answers[p].data();
    if (absl::little_endian::Load32(bytes) != kShmHelloMagic) {
      return absl::UnauthenticatedError(
          absl::StrCat("rank ", rank, ": rank ", p, " sent no shared-memory hello"));
    }
    const auto mode = static_cast<ShmMode>(absl::little_endian::Load32(bytes + 4));
    pids[p] = static_cast<int>(absl::little_endian::Load32(bytes + 16));
    if (config.mode == ShmMode::kOff || mode == ShmMode::kOff) {
      why_not[p] = "PLEXUS_TRANSPORT=tcp";
    } else if (absl::little_endian::Load64(bytes + 8) != host) {
      why_not[p] = "it runs on another host (or in another network or PID namespace)";
    } else {
      slot[p] = candidates++;
    }
  }
  // 2. Offer each candidate its slot in this rank's segment.
  std::mt19937_64 random(std::random_device{}() ^ (uint64_t(getpid()) << 20));
  const uint64_t cookie = random() | 1;
  const size_t slot_bytes = RingSlotBytes(config.ring_bytes);
  // Layout: cookie, the arena area (when asked for), then one ring slot per candidate.
  const size_t arena_area = config.arena_bytes > 0 ? ArenaAreaBytes(config.arena_bytes) : 0;
  const size_t rings_offset = kSegmentHeaderBytes + arena_area;
  if (candidates > 0) {
    auto own = ShmSegment::Create(rings_offset + candidates * slot_bytes);
    if (own.ok()) {
      links->own = std::move(own).value();
      absl::little_endian::Store64(links->own.data(), cookie);
    } else {
      for (int& s : slot) {
        if (s >= 0) s = -1;
      }
      for (std::string& reason : why_not) {
        if (reason.empty()) reason = std::string(own.status().message());
      }
    }
  }
  std::vector<std::string> offers(size, std::string(kOfferBytes, '\0'));
  for (size_t p = 0; p < size; ++p) {
    char* offer = offers[p].data();
    absl::little_endian::Store32(offer, static_cast<uint32_t>(slot[p] >= 0 ? 1 : 0));
    absl::little_endian::Store32(offer + 4, static_cast<uint32_t>(links->own.fd()));
    absl::little_endian::Store64(offer + 8, links->own.size());
    absl::little_endian::Store64(offer + 16, config.ring_bytes);
    absl::little_endian::Store64(offer + 24, cookie);
    absl::little_endian::Store32(offer + 32, static_cast<uint32_t>(slot[p]));
    absl::little_endian::Store64(offer + 40, rings_offset);
    absl::little_endian::Store64(offer + 48, config.arena_bytes);
  }
  RETURN_IF_ERROR(Exchange(sockets, offers, answers, kOfferBytes, deadline, rank, "offer"));
  // 3. Map each peer's segment and check its cookie; tell the peer whether that worked.
  std::vector<std::string> results(size, std::string(1, '\0'));
  std::vector<uint64_t> arena_bytes(size, 0);
  for (size_t p = 0; p < size; ++p) {
    if (!sockets[p].valid() || slot[p] < 0) continue;
    const char* offer = answers[p].data();
    if (absl::little_endian::Load32(offer) == 0) {
      why_not[p] = absl::StrCat("rank ", p, " offered no shared memory");
      continue;
    }
    const int fd = static_cast<int>(absl::little_endian::Load32(offer + 4));
    const uint64_t bytes = absl::little_endian::Load64(offer + 8);
    const uint64_t ring = absl::little_endian::Load64(offer + 16);
    const uint64_t their_cookie = absl::little_endian::Load64(offer + 24);
    const uint64_t their_slot = absl::little_endian::Load32(offer + 32);
    const uint64_t their_rings = absl::little_endian::Load64(offer + 40);
    arena_bytes[p] = absl::little_endian::Load64(offer + 48);
    if (ring == 0 || (ring & (ring - 1)) != 0 || their_rings < kSegmentHeaderBytes ||
        their_rings + (their_slot + 1) * RingSlotBytes(ring) > bytes ||
        (arena_bytes[p] > 0 &&
         kSegmentHeaderBytes + ArenaAreaBytes(arena_bytes[p]) > their_rings)) {
      why_not[p] = absl::StrCat("rank ", p, " offered a malformed segment");
      continue;
    }
    auto segment = ShmSegment::OpenPeer(pids[p], fd, bytes);
    if (!segment.ok()) {
      why_not[p] = std::string(segment.status().message());
      continue;
    }
    if (absl::little_endian::Load64(segment->data()) != their_cookie) {
      why_not[p] = absl::StrCat("the segment of rank ", p, " did not carry its cookie");
      continue;
    }
    links->out[p] = std::make_unique<ShmRing>(
        segment->data() + their_rings + their_slot * RingSlotBytes(ring), ring);
    links->segments[p] = std::move(segment).value();
    results[p][0] = 1;
  }
  RETURN_IF_ERROR(Exchange(sockets, results, answers, 1, deadline, rank, "result"));
  // Every peer has mapped this rank's segment or given up: nobody needs the descriptor now.
  links->own.CloseFd();
  for (size_t p = 0; p < size; ++p) {
    if (!sockets[p].valid()) continue;
    const bool theirs = answers[p][0] == 1;
    if (links->out[p] != nullptr && theirs) {
      links->in[p] = std::make_unique<ShmRing>(
          links->own.data() + rings_offset + slot[p] * slot_bytes, config.ring_bytes);
      ++links->linked;
      continue;
    }
    if (links->out[p] != nullptr && !theirs) {
      why_not[p] = absl::StrCat("rank ", p, " could not map this rank's segment");
    }
    links->out[p] = nullptr;
    links->segments[p] = ShmSegment();
    if (config.mode == ShmMode::kRequired) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank, ": PLEXUS_TRANSPORT=shm, but rank ", p,
                       " cannot be reached through shared memory: ", why_not[p]));
    }
    if (LogEnabled(LogLevel::kDebug) && slot[p] >= 0) {
      Log(LogLevel::kDebug, absl::StrCat("rank ", rank, ": rank ", p, " over TCP: ", why_not[p]));
    }
  }
  // 4. (Every rank takes part, linked or not: the rounds must match.) An arena needs every
  // rank linked to every other with the same arena size: each rank says whether that holds
  // for it, and all decide alike from the same answers.
  bool arena_here = config.arena_bytes > 0 && links->linked == static_cast<int>(size) - 1;
  for (size_t p = 0; p < size; ++p) {
    if (sockets[p].valid()) arena_here &= arena_bytes[p] == config.arena_bytes;
  }
  const std::string said(1, arena_here ? 1 : 0);
  RETURN_IF_ERROR(
      Exchange(sockets, std::vector<std::string>(size, said), answers, 1, deadline, rank, "arena"));
  bool arena_everywhere = arena_here;
  for (size_t p = 0; p < size; ++p) {
    if (sockets[p].valid()) arena_everywhere &= answers[p][0] == 1;
  }
  if (arena_everywhere) {
    std::vector<uint8_t*> areas(size);
    for (size_t p = 0; p < size; ++p) {
      areas[p] = (static_cast<int>(p) == rank ? links->own.data() : links->segments[p].data()) +
                 kSegmentHeaderBytes;
    }
    links->arena = std::make_unique<ShmArena>(rank, std::move(areas), config.arena_bytes);
  }
  if (links->linked == 0) links->own = ShmSegment();
  return links;
}

}  // namespace plexus::tcp
