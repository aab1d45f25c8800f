// A store server out of file descriptors (issue 36): idle connections that never speak hold
// every descriptor its limit allows, and more wait in the listen backlog. A legitimate client
// must still be served within moments, and the server must neither spin nor flood its log.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/net/socket_util.h"
#include "base/store/tcp_store.h"
#include "base/store/tcp_store_server.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

// The case: 1,100 idle connections against a server allowed 1,024 descriptors.
constexpr int kDescriptorLimit = 1024;
constexpr int kIdleConnections = 1100;

// This process holds the idle connections: its own limit must allow them.
bool RaiseOwnDescriptorLimit(rlim_t wanted) {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= wanted) return true;
  if (limit.rlim_max < wanted) return false;
  limit.rlim_cur = wanted;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

TEST(TCPStoreDescriptorsTest, OutOfDescriptorsTheServerStillServesAndNeitherSpinsNorFloods) {
  if (!RaiseOwnDescriptorLimit(kIdleConnections + 256)) {
    GTEST_SKIP() << "this process may not open " << kIdleConnections + 256
                 << " descriptors (ulimit -Hn)";
  }
  const std::string log = testing::TempPath("server.log");
  auto server = testing::ChildServer::Start(
      [&](const std::function<void(int)>& report) {
        rlimit limit{kDescriptorLimit, kDescriptorLimit};
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return;
        if (freopen(log.c_str(), "w", stderr) == nullptr) return;
        TCPStoreServerOptions options;
        options.host = "127.0.0.1";
        auto started = TCPStoreServer::Start(options);
        if (!started.ok()) return;
        report((*started)->port());
        while (true) pause();
      },
      absl::Seconds(10));
  ASSERT_TRUE(server.ok()) << server.status();
  // Connections that never send a byte: more than the server can hold.
  std::vector<ScopedFd> idle;
  for (int i = 0; i < kIdleConnections; ++i) {
    auto fd = ConnectTcpWithRetry("127.0.0.1", (*server)->port(), absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(fd.ok()) << fd.status();
    idle.push_back(std::move(fd).value());
  }
  const absl::Time start = absl::Now();
  TCPStoreOptions options;
  options.port = (*server)->port();
  options.timeout = absl::Seconds(10);
  auto client = TCPStore::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("key", "served").ok());
  auto value = (*client)->Get("key");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(std::string(value->begin(), value->end()), "served");
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // 34-47 ms measured here.
  // With the idle connections still open, the server must be idle too (a loop spinning on
  // its listener would use the whole second).
  const absl::Duration before = testing::CpuTime((*server)->pid());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(testing::CpuTime((*server)->pid()) - before, absl::Milliseconds(300));
  EXPECT_LT(testing::CountLines(log), 40) << "the server's log grew by a line per failed accept";
}

}  // namespace
}  // namespace plexus
