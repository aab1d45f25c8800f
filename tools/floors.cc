// floors: what this machine allows a collective library at best, measured without one, so that
// benchmark ratios can be read against the hardware and not only against other libraries.
//
//   floors shm-exchange [--bytes=1024] [--iters=1000000]
//     Two threads on two CPUs do what a two-rank shared-memory all-reduce of `bytes` cannot do
//     without: copy the input into a shared slot (two slots, alternating), publish a counter,
//     wait for the peer's, and add the peer's slot to its own. No library, no checks.
//   floors tcp-ring [--ranks=4] [--bytes=25165824] [--rounds=5]
//     `ranks` processes in a loopback TCP ring each send `bytes` to the next while receiving as
//     many from the previous (poll, non-blocking sockets): the kernel's share of a ring
//     all-reduce, whose traffic per link is 2 (ranks - 1) / ranks of the message (24 MiB for
//     16 MiB on 4 ranks), without the reduction. Reports the best round and the busbw that
//     bounds an all-reduce of bytes * ranks / (2 (ranks - 1)).
//   floors tcp-all-reduce [--ranks=4] [--bytes=16777216] [--rounds=20]
//     The simplest complete ring all-reduce of `bytes` of float32 over the same loopback ring,
//     one thread per rank: reduce-scatter steps that fold each 256 KiB as it lands, then
//     all-gather steps; the result is checked. After two untimed rounds, reports the mean round
//     (as the bench's time_us) and the best, with the mean's busbw: what a library adds shows
//     against this.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --name=value from argv, or `fallback`.
int64_t Flag(int argc, char** argv, absl::string_view name, int64_t fallback) {
  const std::string prefix = "--" + std::string(name) + "=";
  for (int i = 2; i < argc; ++i) {
    int64_t value;
    if (absl::StartsWith(argv[i], prefix) &&
        absl::SimpleAtoi(absl::string_view(argv[i]).substr(prefix.size()), &value)) {
      return value;
    }
  }
  return fallback;
}

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

int ShmExchange(int64_t bytes, int64_t iters) {
  if (bytes <= 0 || bytes % 4 != 0 || bytes > (1 << 20)) {
    std::fprintf(stderr, "floors shm-exchange: --bytes must be a multiple of 4 up to 1 MiB\n");
    return 2;
  }
  struct alignas(64) Counter {
    std::atomic<uint64_t> value{0};
  };
  Counter published[2];
  const size_t slot = static_cast<size_t>(bytes + 63) & ~size_t{63};
  std::vector<float> shared(2 * 2 * slot / sizeof(float) + 16);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(shared.data()) + 63) &
                                          ~uintptr_t{63});
  auto slot_of = [&](int rank, int64_t k) { return base + (rank * 2 + k % 2) * slot; };
  const int64_t count = bytes / 4;
  auto run = [&](int rank) {
    PinToCpu(rank);
    std::vector<float> data(count, 1.0f);
    const int peer = 1 - rank;
    for (int64_t k = 0; k < iters; ++k) {
      auto* mine = reinterpret_cast<float*>(slot_of(rank, k));
      std::memcpy(mine, data.data(), bytes);
      published[rank].value.store(k + 1, std::memory_order_release);
      while (published[peer].value.load(std::memory_order_acquire) < static_cast<uint64_t>(k + 1)) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      const auto* theirs = reinterpret_cast<const float*>(slot_of(peer, k));
      // Same operands in the same order on both sides, halved so the values stay bounded.
      for (int64_t i = 0; i < count; ++i) {
        data[i] = (rank == 0 ? mine[i] + theirs[i] : theirs[i] + mine[i]) * 0.5f;
      }
    }
  };
  const double start = Seconds();
  std::thread other(run, 1);
  run(0);
  other.join();
  const double per_op = (Seconds() - start) / static_cast<double>(iters);
  std::printf("shm-exchange  2 threads on CPUs 0,1  %8lld bytes  %10.3f us per exchange\n",
              static_cast<long long>(bytes), per_op * 1e6);
  return 0;
}

int Listener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 4) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("floors: listen");
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

// Connects to the next ring member and accepts the previous one; both non-blocking.
bool ConnectRing(int listener, int next_port, int* out, int* in) {
  *out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(next_port));
  if (connect(*out, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return false;
  *in = accept(listener, nullptr, nullptr);
  if (*in < 0) return false;
  const int one = 1;
  setsockopt(*out, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(*out, F_SETFL, fcntl(*out, F_GETFL) | O_NONBLOCK);
  fcntl(*in, F_SETFL, fcntl(*in, F_GETFL) | O_NONBLOCK);
  return true;
}

// Sends `send_bytes` on `out` while receiving `receive_bytes` from `in` (poll, one thread).
// With `accumulate`, each 256 KiB of float32 that lands is added into it at once, as a ring
// reduce-scatter folds its segments. False on a closed or silent peer.
bool Exchange(int out, int in, const char* send_data, int64_t send_bytes, char* receive_data,
              int64_t receive_bytes, float* accumulate) {
  constexpr int64_t kSegment = 256 << 10;
  int64_t sent = 0, received = 0, folded = 0;
  while (sent < send_bytes || received < receive_bytes) {
    pollfd fds[2] = {{out, static_cast<short>(sent < send_bytes ? POLLOUT : 0), 0},
                     {in, static_cast<short>(received < receive_bytes ? POLLIN : 0), 0}};
    if (poll(fds, 2, 10000) <= 0) return false;
    if (sent < send_bytes) {
      const ssize_t n = send(out, send_data + sent, send_bytes - sent, MSG_NOSIGNAL);
      if (n > 0) sent += n;
    }
    if (received < receive_bytes) {
      const ssize_t n = recv(in, receive_data + received, receive_bytes - received, 0);
      if (n == 0) return false;
      if (n > 0) received += n;
    }
    while (accumulate != nullptr && folded < received &&
           (received - folded >= kSegment || received == receive_bytes)) {
      const int64_t end = std::min(folded + kSegment, received) & ~int64_t{3};
      const auto* in_floats = reinterpret_cast<const float*>(receive_data + folded);
      float* into = accumulate + folded / 4;
      for (int64_t i = 0; i < (end - folded) / 4; ++i) into[i] += in_floats[i];
      folded = end;
    }
  }
  return true;
}

struct Timing {
  double best = -1;  // Seconds; negative: this member failed.
  double mean = -1;

  static Timing Start() { return {1e30, 0}; }
  void Add(double seconds, int rounds) {
    best = std::min(best, seconds);
    mean += seconds / rounds;
  }
};

// One ring member streaming `bytes` to the next while receiving as many, `rounds` times.
Timing StreamMember(int listener, int next_port, int64_t bytes, int rounds) {
  int out, in;
  if (!ConnectRing(listener, next_port, &out, &in)) return {};
  std::vector<char> send_buffer(bytes, 1), receive_buffer(bytes, 0);
  Timing timing = Timing::Start();
  for (int round = 0; round < rounds; ++round) {
    const double start = Seconds();
    if (!Exchange(out, in, send_buffer.data(), bytes, receive_buffer.data(), bytes, nullptr)) {
      return {};
    }
    timing.Add(Seconds() - start, rounds);
  }
  close(out);
  close(in);
  return timing;
}

// Untimed rounds first, as the bench's warm-up iterations (page faults, socket buffers).
constexpr int kWarmupRounds = 2;

// One member of the simplest ring all-reduce of `bytes` of float32 (a multiple of 4 * ranks):
// ranks - 1 reduce-scatter steps, each folding its block as it lands, then ranks - 1
// all-gather steps. Checks the sum; the mean and best round.
Timing AllReduceMember(int listener, int next_port, int ranks, int rank, int64_t bytes,
                       int rounds) {
  int out, in;
  if (!ConnectRing(listener, next_port, &out, &in)) return {};
  const int64_t block = bytes / ranks;
  std::vector<float> data(bytes / 4);
  std::vector<char> scratch(block);
  auto at = [&](int b) {
    return reinterpret_cast<char*>(data.data()) + ((b % ranks + ranks) % ranks) * block;
  };
  Timing timing = Timing::Start();
  for (int round = -kWarmupRounds; round < rounds; ++round) {
    std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
    const double start = Seconds();
    for (int s = 0; s < ranks - 1; ++s) {
      if (!Exchange(out, in, at(rank - s), block, scratch.data(), block,
                    reinterpret_cast<float*>(at(rank - s - 1)))) {
        return {};
      }
    }
    for (int s = 0; s < ranks - 1; ++s) {
      if (!Exchange(out, in, at(rank + 1 - s), block, at(rank - s), block, nullptr)) return {};
    }
    if (round >= 0) timing.Add(Seconds() - start, rounds);
    const float expected = ranks * (ranks + 1) / 2.0f;
    for (float value : data) {
      if (value != expected) {
        std::fprintf(stderr, "floors tcp-all-reduce: rank %d got %g, expected %g\n", rank, value,
                     expected);
        return {};
      }
    }
  }
  close(out);
  close(in);
  return timing;
}

// Forks `ranks` ring members running `member(rank, listener, next port)`; the slowest
// member's timing, or a negative best when one failed.
template <typename Member>
Timing RunRing(int ranks, const char* mode, Member member) {
  std::vector<int> listeners(ranks), ports(ranks);
  for (int r = 0; r < ranks; ++r) {
    listeners[r] = Listener(&ports[r]);
    if (listeners[r] < 0) return {};
  }
  int results[2];
  if (pipe(results) != 0) return {};
  std::vector<pid_t> children;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const Timing timing = member(r, listeners[r], ports[(r + 1) % ranks]);
      [[maybe_unused]] ssize_t n = write(results[1], &timing, sizeof(timing));
      _exit(timing.best < 0 ? 1 : 0);
    }
    children.push_back(pid);
  }
  Timing slowest{0, 0};
  bool failed = false;
  for (int r = 0; r < ranks; ++r) {
    Timing timing;
    if (read(results[0], &timing, sizeof(timing)) != sizeof(timing) || timing.best < 0) {
      failed = true;
    }
    slowest.best = std::max(slowest.best, timing.best);
    slowest.mean = std::max(slowest.mean, timing.mean);
  }
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  if (failed) {
    std::fprintf(stderr, "floors %s: a ring member failed\n", mode);
    return {};
  }
  return slowest;
}

int TcpRing(int ranks, int64_t bytes, int rounds) {
  if (ranks < 2 || ranks > 64 || bytes <= 0 || rounds < 1) {
    std::fprintf(stderr, "floors tcp-ring: need 2-64 --ranks, positive --bytes and --rounds\n");
    return 2;
  }
  const Timing slowest = RunRing(ranks, "tcp-ring", [&](int, int listener, int next_port) {
    return StreamMember(listener, next_port, bytes, rounds);
  });
  if (slowest.best < 0) return 1;
  // An all-reduce of M bytes moves 2 (n - 1) / n * M per link; busbw = that over the time.
  const double message = static_cast<double>(bytes) * ranks / (2.0 * (ranks - 1));
  std::printf(
      "tcp-ring  %d ranks  %lld bytes per link  best %.2f ms  %.3f GB/s per link  "
      "all-reduce of %.0f bytes: busbw at most %.3f GB/s\n",
      ranks, static_cast<long long>(bytes), slowest.best * 1e3, bytes / slowest.best / 1e9, message,
      bytes / slowest.best / 1e9);
  return 0;
}

int TcpAllReduce(int ranks, int64_t bytes, int rounds) {
  if (ranks < 2 || ranks > 64 || bytes <= 0 || bytes % (4 * ranks) != 0 || rounds < 1) {
    std::fprintf(stderr,
                 "floors tcp-all-reduce: need 2-64 --ranks, --bytes a multiple of 4 * ranks, "
                 "positive --rounds\n");
    return 2;
  }
  const Timing slowest =
      RunRing(ranks, "tcp-all-reduce", [&](int rank, int listener, int next_port) {
        return AllReduceMember(listener, next_port, ranks, rank, bytes, rounds);
      });
  if (slowest.best < 0) return 1;
  const double traffic = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes);
  std::printf(
      "tcp-all-reduce  %d ranks  %lld bytes  mean %.2f ms  best %.2f ms  busbw %.3f GB/s "
      "(mean)\n",
      ranks, static_cast<long long>(bytes), slowest.mean * 1e3, slowest.best * 1e3,
      traffic / slowest.mean / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "shm-exchange") {
    return ShmExchange(Flag(argc, argv, "bytes", 1024), Flag(argc, argv, "iters", 1000000));
  }
  if (mode == "tcp-ring") {
    return TcpRing(static_cast<int>(Flag(argc, argv, "ranks", 4)),
                   Flag(argc, argv, "bytes", 24 << 20),
                   static_cast<int>(Flag(argc, argv, "rounds", 5)));
  }
  if (mode == "tcp-all-reduce") {
    return TcpAllReduce(static_cast<int>(Flag(argc, argv, "ranks", 4)),
                        Flag(argc, argv, "bytes", 16 << 20),
                        static_cast<int>(Flag(argc, argv, "rounds", 20)));
  }
  std::fprintf(stderr,
               "usage: floors shm-exchange [--bytes=1024] [--iters=1000000]\n"
               "       floors tcp-ring [--ranks=4] [--bytes=25165824] [--rounds=5]\n"
               "       floors tcp-all-reduce [--ranks=4] [--bytes=16777216] [--rounds=20]\n");
  return 2;
}
