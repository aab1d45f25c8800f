#include "tests/testing/recording_relay.h"

#include <poll.h>
#include <sys/socket.h>

#include <utility>
#include <vector>

namespace plexus::testing {

RecordingRelay::RecordingRelay(int target_port) : target_port_(target_port) {
  listener_ = std::move(ListenTcp("127.0.0.1", 0)).value();
  port_ = *LocalPort(listener_.get());
  thread_ = std::thread([this] { Run(); });
}

RecordingRelay::~RecordingRelay() {
  stopping_.store(true);
  thread_.join();
}

std::string RecordingRelay::Carried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return carried_;
}

void RecordingRelay::Run() {
  // Pairs of (accepted, upstream) sockets; bytes read from one are written to the other.
  std::vector<std::pair<ScopedFd, ScopedFd>> pairs;
  while (!stopping_.load()) {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& [a, b] : pairs) {
      fds.push_back({a.get(), POLLIN, 0});
      fds.push_back({b.get(), POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 50) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      ScopedFd accepted(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      auto upstream =
          ConnectTcpWithRetry("127.0.0.1", target_port_, absl::Now() + absl::Seconds(5));
      if (accepted.valid() && upstream.ok()) {
        pairs.emplace_back(std::move(accepted), std::move(upstream).value());
      }
      continue;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto& pair = pairs[(i - 1) / 2];
      const int from = (i % 2 == 1) ? pair.first.get() : pair.second.get();
      const int to = (i % 2 == 1) ? pair.second.get() : pair.first.get();
      char buffer[65536];
      const ssize_t n = recv(from, buffer, sizeof(buffer), 0);
      if (n <= 0) {  // One end left: close both.
        pair.first.Reset();
        pair.second.Reset();
        break;  // `fds` is stale now.
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        const int64_t at = corrupt_at_.load() - static_cast<int64_t>(carried_.size());
        carried_.append(buffer, static_cast<size_t>(n));
        if (at >= 0 && at < n) buffer[at] ^= 1;
      }
      (void)SendAll(to, absl::string_view(buffer, static_cast<size_t>(n)),
                    absl::Now() + absl::Seconds(5));
    }
    for (size_t i = pairs.size(); i-- > 0;) {
      if (!pairs[i].first.valid()) pairs.erase(pairs.begin() + static_cast<long>(i));
    }
  }
}

}  // namespace plexus::testing
