// Backups of receive buffers for the elastic communicator: a failed all-reduce restores its
// buffer from one, and all_reduce_multiple_with_retry re-runs from them (filled as the data
// phase overwrites the buffer: algorithms/keep_originals.h).
#ifndef PLEXUS_FRONTEND_ELASTIC_BACKUP_POOL_H_
#define PLEXUS_FRONTEND_ELASTIC_BACKUP_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "base/core/mutex.h"

namespace plexus::elastic {

// Backup buffers, reused: a fresh buffer per operation costs as much in page faults as a good
// part of the reduction. Keeps at most kPooledBytes.
class BackupPool {
 public:
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
  };
  // A buffer of at least `bytes` (at most twice that, if reused). Thread-safe.
  Buffer Take(size_t bytes);
  // Keeps `buffer` for a later Take, within the pool's cap.
  void Give(Buffer buffer);

 private:
  static constexpr size_t kPooledBytes = size_t{512} << 20;
  Mutex mu_;
  std::multimap<size_t, std::unique_ptr<uint8_t[]>> free_ ABSL_GUARDED_BY(mu_);
  size_t pooled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_BACKUP_POOL_H_
