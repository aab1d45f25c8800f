// A TCP relay on loopback that forwards every connection it accepts to a target port and keeps
// a copy of the bytes it carried both ways: tests check what crossed the wire.
#ifndef PLEXUS_TESTS_TESTING_RECORDING_RELAY_H_
#define PLEXUS_TESTS_TESTING_RECORDING_RELAY_H_

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "base/net/socket_util.h"

namespace plexus::testing {

class RecordingRelay {
 public:
  explicit RecordingRelay(int target_port);
  ~RecordingRelay();

  int port() const { return port_; }
  // Everything carried so far, in both directions.
  std::string Carried() const;
  // Flips the lowest bit of the byte carried at `offset` (counting both directions) when it
  // passes: a tampering on-path attacker.
  void CorruptAt(size_t offset) { corrupt_at_.store(static_cast<int64_t>(offset)); }

 private:
  void Run();

  const int target_port_;
  ScopedFd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> corrupt_at_{-1};
  mutable std::mutex mu_;
  std::string carried_;
  std::thread thread_;
};

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_RECORDING_RELAY_H_
