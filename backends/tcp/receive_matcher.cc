#include "backends/tcp/receive_matcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace plexus::tcp {

void StagingPool::Take(StagedMessage& message, uint64_t size) {
  message.size = size;
  auto it = buffers_.lower_bound(size);
  if (it != buffers_.end() && it->first <= 2 * size + 4096) {
    message.capacity = it->first;
    message.bytes = std::move(it->second);
    pooled_bytes_ -= it->first;
    buffers_.erase(it);
    return;
  }
  message.capacity = size;
  message.bytes.reset(new uint8_t[size > 0 ? size : 1]);
}

void StagingPool::Return(StagedMessage& message) {
  constexpr uint64_t kMaxPooledBytes = uint64_t{64} << 20;
  if (message.bytes == nullptr || message.capacity < 4096) return;
  while (pooled_bytes_ + message.capacity > kMaxPooledBytes && !buffers_.empty()) {
    pooled_bytes_ -= buffers_.begin()->first;  // Drop the smallest first.
    buffers_.erase(buffers_.begin());
  }
  if (pooled_bytes_ + message.capacity > kMaxPooledBytes) return;
  pooled_bytes_ += message.capacity;
  buffers_.emplace(message.capacity, std::move(message.bytes));
}

void ReceiveMatcher::Wait(const OpPtr& op) {
  if (op->kind == Op::Kind::kRecvAny) {
    waiting_any_[op->tag.tag].push_back(op);
  } else {
    waiting_[{op->peer, op->tag.tag}].push_back(op);
  }
}

OpPtr ReceiveMatcher::TakeWaiting(int peer, uint64_t tag) {
  auto it = waiting_.find({peer, tag});
  while (it != waiting_.end() && !it->second.empty()) {
    OpPtr op = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) waiting_.erase(it), it = waiting_.end();
    if (!op->done) return op;
  }
  auto any = waiting_any_.find(tag);
  while (any != waiting_any_.end() && !any->second.empty()) {
    OpPtr op = any->second.front();
    any->second.pop_front();
    if (any->second.empty()) waiting_any_.erase(any), any = waiting_any_.end();
    if (!op->done) {
      op->peer = peer;
      return op;
    }
  }
  return nullptr;
}

StagedPtr ReceiveMatcher::FindStaged(const Op& op) const {
  for (const auto& [key, queue] : staged_) {
    if (key.second != op.tag.tag) continue;
    if (op.kind == Op::Kind::kRecv && key.first != op.peer) continue;
    for (const StagedPtr& message : queue) {
      if (message->waiter == nullptr || message->waiter->done) return message;
    }
  }
  return nullptr;
}

absl::StatusOr<StagedPtr> ReceiveMatcher::Stage(int peer, uint64_t tag, uint64_t signature,
                                                uint64_t size) {
  if (staged_bytes_ + size > max_unexpected_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("peer sent ", staged_bytes_ + size,
                                                     " bytes nobody has asked for (cap ",
                                                     max_unexpected_bytes_, ")"));
  }
  auto message = std::make_shared<StagedMessage>();
  message->peer = peer;
  message->tag = tag;
  message->signature = signature;
  pool_.Take(*message, size);
  staged_bytes_ += size;
  staged_[{peer, tag}].push_back(message);
  return message;
}

void ReceiveMatcher::Unstage(const StagedPtr& message) {
  auto it = staged_.find({message->peer, message->tag});
  if (it == staged_.end()) return;
  auto found = std::find(it->second.begin(), it->second.end(), message);
  if (found == it->second.end()) return;
  it->second.erase(found);
  if (it->second.empty()) staged_.erase(it);
  staged_bytes_ -= message->size;
}

const StagedMessage* ReceiveMatcher::Disagreeing(uint64_t operation, uint64_t signature) const {
  for (const auto& [key, queue] : staged_) {
    if (TagOperation(key.second) != operation) continue;
    for (const StagedPtr& message : queue) {
      if (message->signature != 0 && message->signature != signature) return message.get();
    }
  }
  return nullptr;
}

std::vector<OpPtr> ReceiveMatcher::DropOperation(uint64_t operation) {
  std::vector<OpPtr> dropped;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (TagOperation(it->first.second) != operation) {
      ++it;
      continue;
    }
    dropped.insert(dropped.end(), it->second.begin(), it->second.end());
    it = waiting_.erase(it);
  }
  for (auto it = waiting_any_.begin(); it != waiting_any_.end();) {
    if (TagOperation(it->first) != operation) {
      ++it;
      continue;
    }
    dropped.insert(dropped.end(), it->second.begin(), it->second.end());
    it = waiting_any_.erase(it);
  }
  for (auto it = staged_.begin(); it != staged_.end();) {
    if (TagOperation(it->first.second) != operation) {
      ++it;
      continue;
    }
    for (const StagedPtr& message : it->second) {
      if (message->waiter != nullptr) dropped.push_back(message->waiter);
      staged_bytes_ -= message->size;
    }
    it = staged_.erase(it);
  }
  return dropped;
}

std::vector<OpPtr> ReceiveMatcher::DropWaitingFor(int peer, bool any_too) {
  std::vector<OpPtr> dropped;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->first.first != peer) {
      ++it;
      continue;
    }
    dropped.insert(dropped.end(), it->second.begin(), it->second.end());
    it = waiting_.erase(it);
  }
  if (any_too) {
    for (auto& [tag, queue] : waiting_any_)
      dropped.insert(dropped.end(), queue.begin(), queue.end());
    waiting_any_.clear();
  }
  return dropped;
}

std::vector<OpPtr> ReceiveMatcher::DropAll() {
  std::vector<OpPtr> dropped;
  for (auto& [key, queue] : waiting_) dropped.insert(dropped.end(), queue.begin(), queue.end());
  for (auto& [key, queue] : waiting_any_) dropped.insert(dropped.end(), queue.begin(), queue.end());
  for (auto& [key, queue] : staged_) {
    for (const StagedPtr& message : queue) {
      if (message->waiter != nullptr) dropped.push_back(message->waiter);
    }
  }
  waiting_.clear();
  waiting_any_.clear();
  staged_.clear();
  staged_bytes_ = 0;
  return dropped;
}

}  // namespace plexus::tcp
