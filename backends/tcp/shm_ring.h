// Shared memory between the ranks of one host: anonymous segments (memfd) that peers map by
// opening /proc/<pid>/fd/<fd> while their owner is alive, so no name is ever left in /dev/shm,
// and the single-producer, single-consumer byte rings laid out in them.
//
// A ring carries the same frames a TCP connection would. Sleeping is coordinated through two
// flags in the ring, Dekker style: the reader raises `reader_asleep` before it sleeps and
// re-checks for bytes; the writer publishes its bytes and then checks the flag. Whoever sees the
// other's flag rings the peer's doorbell (a byte on the TCP connection between the two ranks),
// so no wake-up is lost and a ring nobody sleeps on costs no system call.
#ifndef PLEXUS_BACKENDS_TCP_SHM_RING_H_
#define PLEXUS_BACKENDS_TCP_SHM_RING_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace plexus::tcp {

// An mmapped memfd: created by this process, or a peer's opened through /proc.
class ShmSegment {
 public:
  // A zero-filled segment of `bytes`; its fd stays open until CloseFd() so peers can open it.
  static absl::StatusOr<ShmSegment> Create(size_t bytes);
  // Maps the segment process `pid` holds as descriptor `fd`, which must be `bytes` long.
  static absl::StatusOr<ShmSegment> OpenPeer(int pid, int fd, size_t bytes);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // The mapping keeps the memory alive; the descriptor is only needed while peers open it.
  void CloseFd();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// The shared part of a ring: producer and consumer state on separate cache lines.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;  // Bytes ever written (producer).
  alignas(64) std::atomic<uint64_t> tail;  // Bytes ever read (consumer).
  alignas(64) std::atomic<uint32_t> reader_asleep;
  alignas(64) std::atomic<uint32_t> writer_waiting;
};
inline constexpr size_t kRingHeaderBytes = 4096;  // RingControl, padded to a page.
static_assert(sizeof(RingControl) <= kRingHeaderBytes);

// A view of one ring: kRingHeaderBytes of control, then `capacity` bytes (a power of two).
// Write* calls come from one thread at a time, Read* calls from one thread at a time.
class ShmRing {
 public:
  ShmRing(uint8_t* slot, uint64_t capacity);

  // Producer. Copies as much of the iovecs as fits; returns the bytes copied.
  size_t Write(const iovec* iov, int count);
  // After a Write: true if the reader sleeps and must be woken (clears its flag).
  bool ReaderNeedsWake();
  // When a Write could not copy everything: asks the reader to ring once it frees space.
  // True if space appeared meanwhile (then write again instead of waiting).
  bool WaitForSpace();

  // Consumer. Copies up to `size` bytes out; returns the bytes copied.
  size_t Read(void* out, size_t size);
  uint64_t Readable() const;
  // After a Read: true if the writer waits for space and must be woken (clears its flag).
  bool WriterNeedsWake();
  // Before the reader sleeps: raises its flag; false (flag lowered again) if bytes are waiting.
  bool PrepareToSleep();
  void Awake();

 private:
  RingControl* const control_;
  uint8_t* const bytes_;
  const uint64_t capacity_;
};

// Bytes of a segment holding `rings` rings of `capacity` each.
size_t RingSlotBytes(uint64_t capacity);

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_SHM_RING_H_
