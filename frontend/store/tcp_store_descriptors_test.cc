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
#include "frontend/store/socket_util.h"
#include "frontend/store/tcp_store.h"
#include "frontend/store/tcp_store_server.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

constexpr int kDescriptorLimit = 64;
constexpr int kIdleConnections = 150;

TEST(TCPStoreDescriptorsTest, OutOfDescriptorsTheServerStillServesAndNeitherSpinsNorFloods) {
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
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  // With the idle connections still open, the server must be idle too (a loop spinning on
  // its listener would use the whole second).
  const absl::Duration before = testing::CpuTime((*server)->pid());
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(testing::CpuTime((*server)->pid()) - before, absl::Milliseconds(300));
  EXPECT_LT(testing::CountLines(log), 40) << "the server's log grew by a line per failed accept";
}

}  // namespace
}  // namespace plexus
