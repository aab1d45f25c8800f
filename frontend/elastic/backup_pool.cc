#include "frontend/elastic/backup_pool.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace plexus::elastic {

BackupPool::Buffer BackupPool::Take(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  {
    MutexLock lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      Buffer buffer{std::move(it->second), it->first};
      pooled_ -= it->first;
      free_.erase(it);
      return buffer;
    }
  }
  return Buffer{std::unique_ptr<uint8_t[]>(new uint8_t[bytes]), bytes};
}

void BackupPool::Give(Buffer buffer) {
  if (buffer.data == nullptr) return;
  MutexLock lock(mu_);
  while (pooled_ + buffer.capacity > kPooledBytes && !free_.empty()) {
    pooled_ -= free_.begin()->first;
    free_.erase(free_.begin());
  }
  if (pooled_ + buffer.capacity > kPooledBytes) return;
  pooled_ += buffer.capacity;
  free_.emplace(buffer.capacity, std::move(buffer.data));
}

}  // namespace plexus::elastic
