// Test helpers that run code in forked child processes with a deadline.
#ifndef PLEXUS_TESTS_TESTING_SUBPROCESS_H_
#define PLEXUS_TESTS_TESTING_SUBPROCESS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace plexus::testing {

// Forks `count` children; child i runs body(i) and exits with its return value (0 = success).
// Waits for all of them until `timeout`, then kills the stragglers. Returns OK when every child
// exited 0, otherwise an error listing each failing child and how it ended.
absl::Status RunInChildren(int count, const std::function<int(int)>& body,
                           absl::Duration timeout);

// A fresh path under $TEST_TMPDIR (or /tmp) that does not exist yet.
std::string TempPath(const std::string& name);

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_SUBPROCESS_H_
