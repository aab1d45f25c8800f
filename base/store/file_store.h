// FileStore: a Store shared by processes through one file on a common file system.
//
// The file is an append-only log of set/delete records. Writers hold an exclusive flock() while
// they replay the log and append; readers replay under a shared lock, so every process sees
// each operation whole and in one order. Waiting for keys polls the file with a backoff of up
// to 20 ms until the deadline.
#ifndef PLEXUS_BASE_STORE_FILE_STORE_H_
#define PLEXUS_BASE_STORE_FILE_STORE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "base/core/mutex.h"
#include "base/store/key_value_table.h"
#include "base/store/store.h"

namespace plexus {

class FileStore : public Store {
 public:
  // Opens (creating if needed) the log at `path`.
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(
      const std::string& path, absl::Duration timeout = kDefaultStoreTimeout);
  ~FileStore() override;

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  using Store::Wait;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  absl::Status Append(absl::string_view key, absl::string_view value) override;

  const std::string& path() const { return path_; }

 private:
  // Records the log holds; `value` is empty for deletes.
  struct Record {
    bool is_delete;
    std::string key;
    std::string value;
  };
  using Mutation = absl::FunctionRef<absl::Status(KeyValueTable&, std::vector<Record>&)>;

  FileStore(std::string path, int fd, absl::Duration timeout);

  // Replays records appended since the last call into table_. Caller holds the flock.
  absl::Status CatchUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under a shared lock: catch up, then `read` the table.
  absl::Status Read(absl::FunctionRef<void(const KeyValueTable&)> read);
  // Under an exclusive lock: catch up, let `mutate` compute records, append and apply them.
  absl::Status Write(Mutation mutate);
  // Polls until all keys exist or `timeout` passes.
  absl::Status AwaitKeys(absl::Span<const std::string> keys, absl::Duration timeout);

  const std::string path_;
  const int fd_;
  Mutex mu_;  // Serialises this process's threads; flock() serialises processes.
  KeyValueTable table_ ABSL_GUARDED_BY(mu_);
  int64_t offset_ ABSL_GUARDED_BY(mu_) = 0;  // Bytes of the log already replayed.
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_FILE_STORE_H_
