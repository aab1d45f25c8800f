// Mutex: std::mutex with clang's thread-safety annotations, so that `ABSL_GUARDED_BY(mu_)` is
// checked (`bazel build --config=thread_safety`) rather than a comment. std::mutex itself is
// not an annotated capability in libstdc++, so clang could not check a member guarded by one.
// It stays a std::mutex underneath: ThreadSanitizer sees its locking (Debian's abseil, whose
// absl::Mutex it would not see, is not instrumented) and std::condition_variable waits on it.
#ifndef PLEXUS_BASE_CORE_MUTEX_H_
#define PLEXUS_BASE_CORE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace plexus {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

  // The std::mutex underneath, for std::unique_lock and condition variables (UniqueLock).
  std::mutex& native() ABSL_LOCK_RETURNED(this) { return mu_; }
  // Tells the analysis this mutex is held where it cannot see it (a callback its holder runs,
  // a reference to the same mutex under another name). Checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard, annotated).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A std::unique_lock on `mu` (for condition variables), annotated as holding it for its scope.
// The analysis does not follow unlock()/lock() calls on it or the release inside a wait; code
// that unlocks by hand must not touch guarded members meanwhile.
class ABSL_SCOPED_LOCKABLE UniqueLock : public std::unique_lock<std::mutex> {
 public:
  explicit UniqueLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : std::unique_lock<std::mutex>(mu.native()) {}
  // Takes over `mu`, already held (after a successful try_lock).
  UniqueLock(Mutex& mu, std::adopt_lock_t adopt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      : std::unique_lock<std::mutex>(mu.native(), adopt) {}
  ~UniqueLock() ABSL_UNLOCK_FUNCTION() {}
};

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_MUTEX_H_
