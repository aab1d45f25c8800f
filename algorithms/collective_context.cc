#include "algorithms/collective_context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/core/deadline.h"

namespace plexus::algorithms {

uint64_t MakeSignature(CollectiveKind kind, DType dtype, uint64_t sequence, uint64_t count) {
  return (uint64_t{static_cast<uint8_t>(kind)} << 56) |
         (uint64_t{static_cast<uint8_t>(dtype) + 1u} << 48) | ((sequence & 0xffff) << 32) |
         (count & 0xffffffffu);
}

std::string DescribeSignature(uint64_t signature) {
  const auto kind = static_cast<CollectiveKind>(signature >> 56);
  const int dtype_index = static_cast<int>((signature >> 48) & 0xff) - 1;
  std::string dtype = "?";
  if (dtype_index >= 0 && dtype_index < static_cast<int>(std::size(kAllDTypes))) {
    dtype = std::string(DTypeName(kAllDTypes[dtype_index]));
  }
  return absl::StrCat(CollectiveName(kind), " #", (signature >> 32) & 0xffff, " of ",
                      signature & 0xffffffffu, " ", dtype, " elements");
}

uint8_t* ScratchArena::Get(Slot slot, size_t bytes) {
  if (bytes > sizes_[slot]) {
    buffers_[slot].reset(new uint8_t[bytes]);  // Uninitialised: every use writes before reading.
    sizes_[slot] = bytes;
  }
  return buffers_[slot].get();
}

CollectiveContext::CollectiveContext(Transport& transport, CollectiveKind kind, uint64_t sequence,
                                     uint64_t signature, absl::Duration timeout, Work* work,
                                     ScratchArena* arena, absl::Time start)
    : transport_(transport),
      kind_(kind),
      sequence_(sequence),
      signature_(signature),
      deadline_((start == absl::InfinitePast() ? FastNow() : start) + timeout),
      work_(work),
      arena_(arena != nullptr ? arena : &own_arena_) {}

WorkPtr CollectiveContext::Send(int peer, uint32_t step, const void* data, size_t bytes) {
  return transport_.Send(peer, {MakeTag(sequence_, step), signature_},
                         {static_cast<const uint8_t*>(data), bytes},
                         std::max(deadline_ - FastNow(), absl::ZeroDuration()));
}

WorkPtr CollectiveContext::Recv(int peer, uint32_t step, void* data, size_t bytes) {
  return transport_.Recv(peer, {MakeTag(sequence_, step), signature_},
                         {static_cast<uint8_t*>(data), bytes},
                         std::max(deadline_ - FastNow(), absl::ZeroDuration()));
}

absl::Status CollectiveContext::Wait(const WorkPtr& work) {
  // The transport enforces the deadline; the extra second only guards against a lost wakeup.
  absl::Status status =
      work->Wait(std::max(deadline_ - FastNow(), absl::ZeroDuration()) + absl::Seconds(1));
  if (!status.ok()) return Fail(status);
  if (work_ != nullptr) {
    const Work::Stats stats = work->stats();
    work_->AddBytesSent(stats.bytes_sent);
    work_->AddBytesReceived(stats.bytes_received);
  }
  return status;
}

absl::Status CollectiveContext::Fail(absl::Status status) {
  // End the operation everywhere: peers waiting on this rank would otherwise wait out their
  // timeout (a crashed peer already broke the transport; then this is a no-op).
  if (!failed_) {
    failed_ = true;
    transport_.AbortOperation(sequence_, status);
  }
  return status;
}

absl::Status CollectiveContext::WaitAll(const std::vector<WorkPtr>& works) {
  absl::Status first;
  for (const WorkPtr& work : works) {
    absl::Status status = Wait(work);
    if (first.ok()) first = status;
  }
  return first;
}

Partition BalancedPartition(int64_t count, int parts) {
  Partition partition;
  partition.counts.resize(parts);
  partition.offsets.resize(parts);
  int64_t offset = 0;
  for (int i = 0; i < parts; ++i) {
    partition.counts[i] = count / parts + (i < count % parts ? 1 : 0);
    partition.offsets[i] = offset;
    offset += partition.counts[i];
  }
  return partition;
}

int64_t TotalBytes(absl::Span<const Tensor> tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<int64_t>(t.nbytes());
  return total;
}

void PackTensors(absl::Span<const Tensor> tensors, uint8_t* packed) {
  size_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.nbytes() > 0) std::memcpy(packed + offset, t.data(), t.nbytes());
    offset += t.nbytes();
  }
}

void UnpackTensors(const uint8_t* packed, absl::Span<const Tensor> tensors) {
  size_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.nbytes() > 0) std::memcpy(t.data(), packed + offset, t.nbytes());
    offset += t.nbytes();
  }
}

}  // namespace plexus::algorithms
