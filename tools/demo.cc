// A small multi-process demonstration of the store and the dispatcher: forks N local ranks that
// meet through a TCPStore on loopback, form a process group through init_process_group, run an
// all_reduce and a broadcast through the dispatcher (on the store-based test backend, which shows
// the dispatcher on its own; //tools:bench runs the real ones), check the results, and report
// store round-trip times.
//
//   bazel run //tools:demo -- --ranks=4 --adds=2000
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/interface/backend_registry.h"
#include "base/store/tcp_store.h"
#include "base/store/tcp_store_server.h"
#include "frontend/dispatch/init.h"
#include "tests/testing/store_backend.h"

namespace plexus {
namespace {

struct DemoFlags {
  int ranks = 4;
  int adds = 2000;
};

bool ParseFlags(int argc, char** argv, DemoFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("ranks");
        v && absl::SimpleAtoi(v, &flags->ranks) && flags->ranks >= 1 && flags->ranks <= 64) {
      continue;
    }
    if (const char* v = value("adds"); v && absl::SimpleAtoi(v, &flags->adds) && flags->adds >= 1) {
      continue;
    }
    fprintf(stderr, "usage: demo [--ranks=1..64] [--adds=N]\nbad flag: %s\n", argv[i]);
    return false;
  }
  return true;
}

int RunRank(int rank, const DemoFlags& flags, int port, int report_fd) {
  TCPStoreOptions store_options;
  store_options.port = port;
  store_options.timeout = absl::Seconds(60);
  auto store = TCPStore::Create(store_options);
  if (!store.ok()) {
    fprintf(stderr, "rank %d: %s\n", rank, std::string(store.status().message()).c_str());
    return 1;
  }
  InitOptions options;
  options.backend = testing::kStoreBackendName;
  options.store = std::shared_ptr<Store>(std::move(store).value());
  options.rank = rank;
  options.world_size = flags.ranks;
  options.timeout = absl::Seconds(60);
  const absl::Time init_start = absl::Now();
  auto group = InitProcessGroup(options);
  if (!group.ok()) {
    fprintf(stderr, "rank %d: %s\n", rank, std::string(group.status().message()).c_str());
    return 1;
  }
  const absl::Duration init_time = absl::Now() - init_start;
  ProcessGroup& pg = **group;

  const absl::Time add_start = absl::Now();
  for (int i = 0; i < flags.adds; ++i) {
    if (!options.store->Add("demo/counter", 1).ok()) return 2;
  }
  const absl::Duration add_time = absl::Now() - add_start;

  std::vector<double> values(1000, rank + 1.0);
  auto reduced = pg.AllReduce(Tensor::Flat(values.data(), DType::kFloat64, values.size()));
  int wrong = 0;
  if (!reduced.ok() || !(*reduced)->Wait(absl::Seconds(60)).ok()) return 3;
  const double expected = flags.ranks * (flags.ranks + 1) / 2.0;
  for (double v : values) wrong += v != expected;

  int64_t token = rank == 0 ? 4242 : 0;
  auto broadcast = pg.Broadcast(Tensor::Flat(&token, DType::kInt64, 1));
  if (!broadcast.ok() || !(*broadcast)->Wait(absl::Seconds(60)).ok()) return 4;
  wrong += token != 4242;

  auto barrier = pg.Barrier();
  if (!barrier.ok() || !(*barrier)->Wait(absl::Seconds(60)).ok()) return 5;
  auto total = options.store->Get("demo/counter");
  const std::string line = absl::StrFormat(
      "%4d  %-22s  %9.2f  %12.1f  %14s  %5d\n", rank, pg.backend_string(),
      absl::ToDoubleMilliseconds(init_time), absl::ToDoubleMicroseconds(add_time) / flags.adds,
      total.ok() ? *total : "?", wrong);
  if (write(report_fd, line.data(), line.size()) < 0) return 6;
  if (!pg.Shutdown(absl::Seconds(60)).ok()) return 7;
  return wrong == 0 ? 0 : 8;
}

int Main(int argc, char** argv) {
  DemoFlags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  // Ranks are forked before the server thread starts (forking a threaded process is unsafe);
  // they learn the server's port through a pipe.
  int port_pipe[2];
  int report_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(report_pipe) != 0) return 1;
  fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < flags.ranks; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      close(port_pipe[1]);
      close(report_pipe[0]);
      int port = 0;
      if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) _exit(1);
      _exit(RunRank(rank, flags, port, report_pipe[1]));
    }
    pids.push_back(pid);
  }
  close(port_pipe[0]);
  close(report_pipe[1]);
  TCPStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.expected_clients = flags.ranks;
  auto server = TCPStoreServer::Start(server_options);
  int port = server.ok() ? (*server)->port() : 0;  // Port 0 makes the ranks fail fast.
  for (int rank = 0; rank < flags.ranks; ++rank) {
    if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) return 1;
  }
  close(port_pipe[1]);
  if (!server.ok()) {
    fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  printf("plexus demo: %d ranks meet through a TCPStore on 127.0.0.1:%d\n", flags.ranks, port);
  printf("registered backends: %s\n\n",
         absl::StrJoin(BackendRegistry::Global().Names(), ", ").c_str());
  printf("rank  backends                  init_ms  add_rtt_us  counter_after  wrong\n");
  fflush(stdout);
  char buffer[4096];
  ssize_t n;
  while ((n = read(report_pipe[0], buffer, sizeof(buffer))) > 0) fwrite(buffer, 1, n, stdout);
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  printf("\n%s: %d of %d ranks failed\n", failures == 0 ? "OK" : "FAILED", failures, flags.ranks);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace plexus

int main(int argc, char** argv) { return plexus::Main(argc, argv); }
