#include "backends/tcp/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plexus::tcp {

absl::StatusOr<ShmSegment> ShmSegment::Create(size_t bytes) {
  const int fd = memfd_create("plexus-shm", MFD_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("memfd_create: ", strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("sizing a ", bytes, "-byte shared-memory segment: ", strerror(error)));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("mmap: ", strerror(error)));
  }
  ShmSegment segment;
  segment.data_ = static_cast<uint8_t*>(data);
  segment.size_ = bytes;
  segment.fd_ = fd;
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::OpenPeer(int pid, int fd, size_t bytes) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int mine = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) {
    return absl::UnavailableError(absl::StrCat("opening ", path, ": ", strerror(errno)));
  }
  struct stat info = {};
  if (fstat(mine, &info) != 0 || static_cast<size_t>(info.st_size) != bytes) {
    close(mine);
    return absl::UnavailableError(
        absl::StrCat(path, " is not the ", bytes, "-byte segment the peer announced"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  close(mine);  // The mapping keeps the segment.
  if (data == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("mmap of ", path, ": ", strerror(errno)));
  }
  ShmSegment segment;
  segment.data_ = static_cast<uint8_t*>(data);
  segment.size_ = bytes;
  return segment;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    this->~ShmSegment();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (data_ != nullptr) munmap(data_, size_);
  CloseFd();
}

void ShmSegment::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

size_t RingSlotBytes(uint64_t capacity) { return kRingHeaderBytes + capacity; }

namespace {

// After publishing what the other side looks at: true (and the flag cleared) if the other
// side raised `flag` to be woken. The fence pairs with the one the flag's raiser runs.
bool TakeFlag(std::atomic<uint32_t>& flag) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return flag.load(std::memory_order_relaxed) != 0 &&
         flag.exchange(0, std::memory_order_acq_rel) != 0;
}

}  // namespace

ShmRing::ShmRing(uint8_t* slot, uint64_t capacity)
    : control_(reinterpret_cast<RingControl*>(slot)),
      bytes_(slot + kRingHeaderBytes),
      capacity_(capacity) {}

size_t ShmRing::Write(const iovec* iov, int count) {
  const uint64_t head = control_->head.load(std::memory_order_relaxed);
  const uint64_t tail = control_->tail.load(std::memory_order_acquire);
  uint64_t room = capacity_ - (head - tail);
  uint64_t at = head;
  for (int i = 0; i < count && room > 0; ++i) {
    const auto* from = static_cast<const uint8_t*>(iov[i].iov_base);
    uint64_t left = std::min<uint64_t>(iov[i].iov_len, room);
    room -= left;
    while (left > 0) {
      const uint64_t offset = at & (capacity_ - 1);
      const uint64_t piece = std::min(left, capacity_ - offset);
      std::memcpy(bytes_ + offset, from, piece);
      from += piece;
      at += piece;
      left -= piece;
    }
  }
  if (at != head) control_->head.store(at, std::memory_order_release);
  return static_cast<size_t>(at - head);
}

bool ShmRing::ReaderNeedsWake() { return TakeFlag(control_->reader_asleep); }

bool ShmRing::WaitForSpace() {
  control_->writer_waiting.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t head = control_->head.load(std::memory_order_relaxed);
  if (head - control_->tail.load(std::memory_order_acquire) < capacity_) {
    control_->writer_waiting.store(0, std::memory_order_relaxed);
    return true;
  }
  return false;
}

uint64_t ShmRing::Readable() const {
  return control_->head.load(std::memory_order_acquire) -
         control_->tail.load(std::memory_order_relaxed);
}

size_t ShmRing::Read(void* out, size_t size) {
  const uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  const uint64_t head = control_->head.load(std::memory_order_acquire);
  uint64_t left = std::min<uint64_t>(size, head - tail);
  const uint64_t total = left;
  auto* to = static_cast<uint8_t*>(out);
  uint64_t at = tail;
  while (left > 0) {
    const uint64_t offset = at & (capacity_ - 1);
    const uint64_t piece = std::min(left, capacity_ - offset);
    std::memcpy(to, bytes_ + offset, piece);
    to += piece;
    at += piece;
    left -= piece;
  }
  if (total > 0) control_->tail.store(at, std::memory_order_release);
  return static_cast<size_t>(total);
}

bool ShmRing::WriterNeedsWake() { return TakeFlag(control_->writer_waiting); }

bool ShmRing::PrepareToSleep() {
  control_->reader_asleep.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (Readable() == 0) return true;
  control_->reader_asleep.store(0, std::memory_order_relaxed);
  return false;
}

void ShmRing::Awake() { control_->reader_asleep.store(0, std::memory_order_relaxed); }

}  // namespace plexus::tcp
