// Test helpers that run code in forked child processes with a deadline.
#ifndef PLEXUS_TESTS_TESTING_SUBPROCESS_H_
#define PLEXUS_TESTS_TESTING_SUBPROCESS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace plexus::testing {

// Forks `count` children; child i runs body(i) and exits with its return value (0 = success).
// Waits for all of them until `timeout`, then kills the stragglers. Returns OK when every child
// exited 0, otherwise an error listing each failing child and how it ended.
absl::Status RunInChildren(int count, const std::function<int(int)>& body, absl::Duration timeout);

// A server in a forked child process, so that the test process stays single-threaded and can
// fork further children safely (forking a process that runs threads can deadlock the child).
class ChildServer {
 public:
  // `serve` runs in the child: it starts a server, calls report(port), and keeps the server
  // alive (returning only on failure). Start() waits up to `timeout` for the port.
  static absl::StatusOr<std::unique_ptr<ChildServer>> Start(
      const std::function<void(const std::function<void(int)>& report)>& serve,
      absl::Duration timeout);
  ~ChildServer();  // Kills and reaps the child.
  int port() const { return port_; }
  int pid() const { return pid_; }  // To stop (SIGSTOP) or signal the server.

 private:
  ChildServer(int pid, int port) : pid_(pid), port_(port) {}
  int pid_;
  int port_;
};

// A fresh path under $TEST_TMPDIR (or /tmp) that does not exist yet.
std::string TempPath(const std::string& name);

// User plus system CPU time process `pid` has used (zero if it cannot be read).
absl::Duration CpuTime(int pid);
// Voluntary context switches of every thread of process `pid` so far: how often its threads
// went to sleep, so a loop that wakes on a timer shows (-1 if it cannot be read).
int64_t VoluntarySwitches(int pid);
// The lines in the file at `path` (0 if it cannot be read).
int CountLines(const std::string& path);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_SUBPROCESS_H_
