// A forming tcp mesh whose rank runs out of file descriptors (issue 36): its listener cannot
// accept the peer waiting in its backlog. It must back off instead of spinning on the
// readable listener, log a summary rather than a line per failed accept, keep the peer waiting
// rather than turn it away, and form the group as soon as descriptors are free again.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backends/tcp/tcp_transport.h"
#include "base/core/status_macros.h"
#include "base/net/socket_util.h"
#include "base/store/tcp_store.h"
#include "base/store/tcp_store_server.h"
#include "gtest/gtest.h"
#include "tests/testing/loopback_tcp.h"
#include "tests/testing/subprocess.h"

namespace plexus {

using tcp::TcpTransport;

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr size_t kMessageBytes = 100000;

// From getrusage, not /proc (testing::CpuTime): with the descriptor table full, opening a file
// would fail and read as no CPU at all.
absl::Duration OwnCpuTime() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
}

absl::StatusOr<std::unique_ptr<TcpTransport>> MakeTransport(int store_port, int rank) {
  TCPStoreOptions store_options;
  store_options.port = store_port;
  store_options.timeout = kTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<TCPStore> store, TCPStore::Create(store_options));
  return testing::LoopbackTcpTransport(std::move(store), rank, 2, "short of descriptors",
                                       tcp::ShmMode::kOff, kTimeout);
}

// Opens descriptors until the (lowered) limit refuses one; closing the returned ones and
// restoring `saved` gives them back.
std::vector<ScopedFd> FillDescriptorTable(rlimit& saved) {
  getrlimit(RLIMIT_NOFILE, &saved);
  rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 512);
  setrlimit(RLIMIT_NOFILE, &lowered);
  std::vector<ScopedFd> filler;
  while (true) {
    ScopedFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) break;
    filler.push_back(std::move(fd));
  }
  return filler;
}

// Rank 1 accepts rank 0's connection. Exit codes name what failed; details go to stdout.
int RunRank1(int store_port, const std::string& log) {
  if (freopen(log.c_str(), "w", stderr) == nullptr) return 10;
  TCPStoreOptions store_options;
  store_options.port = store_port;
  store_options.timeout = kTimeout;
  auto control = TCPStore::Create(store_options);
  if (!control.ok()) return 11;
  absl::StatusOr<std::unique_ptr<TcpTransport>> transport = absl::UnknownError("not formed");
  std::thread forming([&] { transport = MakeTransport(store_port, 1); });
  // Rank 0 has seen the listener close a garbage connection: its accept loop is running.
  if (!(*control)->Wait({"probed"}).ok()) return 12;
  rlimit saved;
  std::vector<ScopedFd> filler = FillDescriptorTable(saved);
  if (!(*control)->Set("full", "1").ok()) return 13;
  if (!(*control)->Wait({"connecting"}).ok()) return 14;
  // Rank 0's connection waits in the backlog now; a listener that spins on it uses the whole
  // measured second.
  const absl::Duration before = OwnCpuTime();
  absl::SleepFor(absl::Seconds(1));
  const absl::Duration spent = OwnCpuTime() - before;
  filler.clear();
  setrlimit(RLIMIT_NOFILE, &saved);
  forming.join();
  if (!transport.ok()) {
    printf("rank 1: %s\n", transport.status().ToString().c_str());
    return 15;
  }
  if (spent > absl::Milliseconds(300)) {
    printf("rank 1 used %s of CPU in one second out of descriptors\n",
           absl::FormatDuration(spent).c_str());
    return 16;
  }
  std::vector<uint8_t> received(kMessageBytes);
  const MessageTag tag{MakeTag(1, 1), 0};
  absl::Status got =
      (*transport)->Recv(0, tag, {received.data(), received.size()}, kTimeout)->Wait(kTimeout);
  if (!got.ok() || received != std::vector<uint8_t>(kMessageBytes, 7)) return 17;
  fflush(stderr);
  const int lines = testing::CountLines(log);
  if (lines > 10) {
    printf("rank 1 logged %d lines\n", lines);
    return 18;
  }
  FILE* file = fopen(log.c_str(), "r");
  std::string text(1 << 16, '\0');
  text.resize(file == nullptr ? 0 : fread(text.data(), 1, text.size(), file));
  if (file != nullptr) fclose(file);
  if (!absl::StrContains(text, "out of file descriptors")) {
    printf("rank 1's log does not name the shortage: %s\n", text.c_str());
    return 19;
  }
  return 0;
}

int RunRank0(int store_port) {
  TCPStoreOptions store_options;
  store_options.port = store_port;
  store_options.timeout = kTimeout;
  auto control = TCPStore::Create(store_options);
  if (!control.ok()) return 21;
  auto address = (*control)->Get("addr/1");
  if (!address.ok()) return 22;
  const std::string text(address->begin(), address->end());
  const int port = std::stoi(text.substr(text.rfind(':') + 1));
  {
    auto probe = ConnectTcpWithRetry("127.0.0.1", port, absl::Now() + kTimeout);
    if (!probe.ok()) return 23;
    (void)SendAll(probe->get(), std::string(24, 'x'), absl::Now() + kTimeout);
    char byte;
    // The listener accepted it and closes it (a garbage hello): its loop is running.
    if (RecvExact(probe->get(), &byte, 1, absl::Now() + kTimeout).ok()) return 24;
  }
  if (!(*control)->Set("probed", "1").ok() || !(*control)->Wait({"full"}).ok()) return 25;
  if (!(*control)->Set("connecting", "1").ok()) return 26;
  auto transport = MakeTransport(store_port, 0);
  if (!transport.ok()) {
    printf("rank 0: %s\n", transport.status().ToString().c_str());
    return 27;
  }
  std::vector<uint8_t> sent(kMessageBytes, 7);
  const MessageTag tag{MakeTag(1, 1), 0};
  return (*transport)->Send(1, tag, {sent.data(), sent.size()}, kTimeout)->Wait(kTimeout).ok() ? 0
                                                                                               : 28;
}

TEST(MeshDescriptorsTest, AListenerOutOfDescriptorsBacksOffAndFormsOnceTheyAreFree) {
  auto server = testing::ChildServer::Start(
      [](const std::function<void(int)>& report) {
        TCPStoreServerOptions options;
        options.host = "127.0.0.1";
        auto started = TCPStoreServer::Start(options);
        if (!started.ok()) return;
        report((*started)->port());
        while (true) pause();
      },
      absl::Seconds(10));
  ASSERT_TRUE(server.ok()) << server.status();
  const int store_port = (*server)->port();
  const std::string log = testing::TempPath("rank1.log");
  absl::Status ran = testing::RunInChildren(
      2, [&](int rank) { return rank == 1 ? RunRank1(store_port, log) : RunRank0(store_port); },
      absl::Seconds(60));
  EXPECT_TRUE(ran.ok()) << ran;
}

}  // namespace
}  // namespace plexus
