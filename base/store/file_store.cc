#include "base/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

// Record layout: op (1 byte: 'S' or 'D'), key length, value length (4 bytes each, little
// endian), key, value.
constexpr size_t kRecordHeaderBytes = 9;
constexpr uint32_t kMaxRecordPart = 1u << 30;

absl::Status ErrnoError(absl::string_view what, absl::string_view path) {
  return absl::InternalError(absl::StrCat("FileStore ", path, ": ", what, ": ", strerror(errno)));
}

class FileLock {
 public:
  FileLock(int fd, int mode) : fd_(fd) {
    while ((ok_ = flock(fd_, mode) == 0) == false && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (ok_) flock(fd_, LOCK_UN);
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

void AppendU32(std::string* out, uint32_t value) {
  char bytes[4];
  absl::little_endian::Store32(bytes, value);
  out->append(bytes, 4);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& path,
                                                           absl::Duration timeout) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot open", path);
  return std::unique_ptr<FileStore>(new FileStore(path, fd, timeout));
}

FileStore::FileStore(std::string path, int fd, absl::Duration timeout)
    : Store(timeout), path_(std::move(path)), fd_(fd) {}

FileStore::~FileStore() { close(fd_); }

absl::Status FileStore::CatchUp() {
  struct stat st;
  if (fstat(fd_, &st) != 0) return ErrnoError("cannot stat", path_);
  if (st.st_size <= offset_) return absl::OkStatus();
  std::string bytes(static_cast<size_t>(st.st_size - offset_), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = pread(fd_, bytes.data() + done, bytes.size() - done, offset_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read", path_);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  size_t pos = 0;
  while (done - pos >= kRecordHeaderBytes) {
    const char op = bytes[pos];
    const uint32_t key_len = absl::little_endian::Load32(bytes.data() + pos + 1);
    const uint32_t value_len = absl::little_endian::Load32(bytes.data() + pos + 5);
    if ((op != 'S' && op != 'D') || key_len > kMaxRecordPart || value_len > kMaxRecordPart) {
      return absl::DataLossError(absl::StrCat("FileStore ", path_, ": corrupt record at offset ",
                                              offset_ + static_cast<int64_t>(pos)));
    }
    const size_t total = kRecordHeaderBytes + key_len + value_len;
    if (done - pos < total) break;  // Written by a writer that has not finished; read it later.
    absl::string_view key(bytes.data() + pos + kRecordHeaderBytes, key_len);
    if (op == 'S') {
      table_.Set(key,
                 absl::string_view(bytes.data() + pos + kRecordHeaderBytes + key_len, value_len));
    } else {
      table_.Delete(key);
    }
    pos += total;
  }
  offset_ += static_cast<int64_t>(pos);
  return absl::OkStatus();
}

absl::Status FileStore::Read(absl::FunctionRef<void(const KeyValueTable&)> read) {
  MutexLock lock(mu_);
  FileLock file_lock(fd_, LOCK_SH);
  if (!file_lock.ok()) return ErrnoError("cannot lock", path_);
  RETURN_IF_ERROR(CatchUp());
  read(table_);
  return absl::OkStatus();
}

absl::Status FileStore::Write(Mutation mutate) {
  MutexLock lock(mu_);
  FileLock file_lock(fd_, LOCK_EX);
  if (!file_lock.ok()) return ErrnoError("cannot lock", path_);
  RETURN_IF_ERROR(CatchUp());
  std::vector<Record> records;
  RETURN_IF_ERROR(mutate(table_, records));
  if (records.empty()) return absl::OkStatus();
  std::string bytes;
  for (const Record& record : records) {
    bytes.push_back(record.is_delete ? 'D' : 'S');
    AppendU32(&bytes, static_cast<uint32_t>(record.key.size()));
    AppendU32(&bytes, static_cast<uint32_t>(record.value.size()));
    bytes += record.key;
    bytes += record.value;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot append", path_);
    done += static_cast<size_t>(n);
  }
  // Our own records are replayed like anyone else's, keeping one code path for the table.
  return CatchUp();
}

absl::Status FileStore::AwaitKeys(absl::Span<const std::string> keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Microseconds(200);
  while (true) {
    std::vector<std::string> missing;
    RETURN_IF_ERROR(Read([&](const KeyValueTable& table) { missing = table.Missing(keys); }));
    if (missing.empty()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) return WaitTimeoutError(timeout, missing, absl::StrCat("file ", path_));
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Milliseconds(20));
  }
}

absl::Status FileStore::Set(absl::string_view key, absl::string_view value) {
  return Write([&](KeyValueTable&, std::vector<Record>& records) {
    records.push_back({false, std::string(key), std::string(value)});
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> FileStore::Get(absl::string_view key) {
  ASSIGN_OR_RETURN(std::vector<std::string> values, MultiGet({std::string(key)}));
  return std::move(values[0]);
}

absl::StatusOr<int64_t> FileStore::Add(absl::string_view key, int64_t delta) {
  int64_t result = 0;
  RETURN_IF_ERROR(Write([&](KeyValueTable& table, std::vector<Record>& records) {
    KeyValueTable scratch;
    const std::string* current = table.Find(key);
    if (current != nullptr) scratch.Set(key, *current);
    ASSIGN_OR_RETURN(result, scratch.Add(key, delta));
    records.push_back({false, std::string(key), *scratch.Find(key)});
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<std::string> FileStore::CompareSet(absl::string_view key, absl::string_view expected,
                                                  absl::string_view desired) {
  std::string result;
  RETURN_IF_ERROR(Write([&](KeyValueTable& table, std::vector<Record>& records) {
    const std::string* current = table.Find(key);
    const bool matches = current == nullptr ? expected.empty() : *current == expected;
    if (matches) {
      records.push_back({false, std::string(key), std::string(desired)});
      result = std::string(desired);
    } else {
      result = current == nullptr ? std::string(expected) : *current;
    }
    return absl::OkStatus();
  }));
  return result;
}

absl::Status FileStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  return AwaitKeys(keys, timeout);
}

absl::StatusOr<bool> FileStore::Check(absl::Span<const std::string> keys) {
  bool present = false;
  RETURN_IF_ERROR(Read([&](const KeyValueTable& table) { present = table.ContainsAll(keys); }));
  return present;
}

absl::StatusOr<bool> FileStore::DeleteKey(absl::string_view key) {
  bool existed = false;
  RETURN_IF_ERROR(Write([&](KeyValueTable& table, std::vector<Record>& records) {
    existed = table.Find(key) != nullptr;
    if (existed) records.push_back({true, std::string(key), ""});
    return absl::OkStatus();
  }));
  return existed;
}

absl::StatusOr<int64_t> FileStore::NumKeys() {
  int64_t count = 0;
  RETURN_IF_ERROR(Read([&](const KeyValueTable& table) { count = table.size(); }));
  return count;
}

absl::StatusOr<std::vector<std::string>> FileStore::MultiGet(absl::Span<const std::string> keys) {
  RETURN_IF_ERROR(AwaitKeys(keys, timeout()));
  std::vector<std::string> values;
  bool complete = true;
  RETURN_IF_ERROR(Read([&](const KeyValueTable& table) {
    for (const std::string& key : keys) {
      const std::string* value = table.Find(key);
      if (value == nullptr) {
        complete = false;
        return;
      }
      values.push_back(*value);
    }
  }));
  if (!complete) {
    return absl::NotFoundError(absl::StrCat("FileStore ", path_, ": a key was deleted while ",
                                            "multi_get was reading it"));
  }
  return values;
}

absl::Status FileStore::MultiSet(absl::Span<const std::string> keys,
                                 absl::Span<const std::string> values) {
  RETURN_IF_ERROR(CheckMultiSetSizes(keys, values));
  return Write([&](KeyValueTable&, std::vector<Record>& records) {
    for (size_t i = 0; i < keys.size(); ++i) records.push_back({false, keys[i], values[i]});
    return absl::OkStatus();
  });
}

absl::Status FileStore::Append(absl::string_view key, absl::string_view value) {
  return Write([&](KeyValueTable& table, std::vector<Record>& records) {
    const std::string* current = table.Find(key);
    records.push_back(
        {false, std::string(key), absl::StrCat(current == nullptr ? "" : *current, value)});
    return absl::OkStatus();
  });
}

}  // namespace plexus
