#include "tools/bench_load.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "frontend/dispatch/init.h"

namespace plexus::bench {
namespace {

constexpr int kMaxCount = 64;
constexpr size_t kCountsBytes = (kMaxCount + 1) * sizeof(std::atomic<uint64_t>);
constexpr int kMatrix = 256;

void Spin(std::atomic<uint64_t>& done) {
  while (true) {
    for (int i = 0; i < 1 << 20; ++i) asm volatile("");
    done.fetch_add(1, std::memory_order_relaxed);
  }
}

// c += a * b, over and over: the cores' arithmetic and the caches busy, as a step's compute.
void MultiplyMatrices(std::atomic<uint64_t>& done) {
  std::vector<float> a(kMatrix * kMatrix, 1.0f), b(kMatrix * kMatrix, 0.5f), c(kMatrix * kMatrix);
  while (true) {
    for (int i = 0; i < kMatrix; ++i) {
      for (int k = 0; k < kMatrix; ++k) {
        const float x = a[i * kMatrix + k];
        for (int j = 0; j < kMatrix; ++j) c[i * kMatrix + j] += x * b[k * kMatrix + j];
      }
    }
    asm volatile("" : : "r"(c.data()) : "memory");
    done.fetch_add(1, std::memory_order_relaxed);
  }
}

// One rank of the second job: all-reduces 64 KiB until it is killed.
int CommRank(int rank, int world, const std::string& store, std::atomic<uint64_t>* counts) {
  InitOptions options;
  options.backend = "cpu:tcp";
  options.init_method = absl::StrCat("file://", store);
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Minutes(1);
  auto group = InitProcessGroup(options);
  if (!group.ok()) {
    fprintf(stderr, "bench --load=comm: rank %d: %s\n", rank,
            std::string(group.status().message()).c_str());
    return 1;
  }
  std::vector<float> data(16384, 1.0f);
  counts[0].fetch_add(1);
  while (true) {
    auto work = (*group)->AllReduce(
        {Tensor::Flat(data.data(), DType::kFloat32, static_cast<int64_t>(data.size()))});
    if (!work.ok() || !(*work)->Wait(absl::Minutes(1)).ok()) return 1;
    counts[1 + rank].fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

std::string LoadSpec::label() const { return absl::StrCat(kind, ":", count); }

absl::StatusOr<LoadSpec> ParseLoad(const std::string& text) {
  const size_t colon = text.find(':');
  LoadSpec spec;
  spec.kind = text.substr(0, colon);
  if (spec.kind != "spin" && spec.kind != "compute" && spec.kind != "comm") {
    return absl::InvalidArgumentError(
        absl::StrCat("--load: unknown kind '", spec.kind, "'; known: spin:N, compute:N, comm:N"));
  }
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &spec.count) ||
      spec.count < 1 || spec.count > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("--load=", text, ": N (after the colon) must be 1..", kMaxCount));
  }
  if (spec.kind == "comm" && spec.count < 2) {
    return absl::InvalidArgumentError("--load=comm:N needs N >= 2 ranks");
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Load>> Load::Start(const LoadSpec& spec, const std::string& dir) {
  std::unique_ptr<Load> load(new Load(spec));
  // Each start forms a fresh group: a store left by the last start (another rank count or
  // round) would hand this one its keys.
  load->store_ = absl::StrCat(dir, "/load_store");
  unlink(load->store_.c_str());
  void* shared =
      mmap(nullptr, kCountsBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return absl::InternalError("--load: mmap failed");
  load->counts_ = new (shared) std::atomic<uint64_t>[kMaxCount + 1]();
  std::atomic<uint64_t>* counts = load->counts_;
  const int processes = spec.kind == "compute" ? 1 : spec.count;
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("--load: fork failed");
    if (pid == 0) {
      if (spec.kind == "spin") {
        counts[0].fetch_add(1);
        Spin(counts[1 + i]);
      } else if (spec.kind == "compute") {
        std::vector<std::thread> threads;
        for (int t = 0; t < spec.count; ++t) {
          threads.emplace_back([counts, t] { MultiplyMatrices(counts[1 + t]); });
        }
        counts[0].fetch_add(spec.count);
        for (std::thread& thread : threads) thread.join();
      } else {
        _exit(CommRank(i, spec.count, load->store_, counts));
      }
      _exit(0);
    }
    load->pids_.push_back(pid);
  }
  // Measured only once the load runs (the comm job's group may take a moment to form).
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (counts[0].load() < static_cast<uint64_t>(spec.count)) {
    for (pid_t pid : load->pids_) {
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        return absl::UnavailableError(absl::StrCat("--load=", spec.label(), ": a process exited"));
      }
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("--load=", spec.label(), ": not running after a minute"));
    }
    usleep(1000);
  }
  return load;
}

double Load::WorkDone() {
  uint64_t total = 0;
  for (int i = 1; i <= kMaxCount; ++i) total += counts_[i].load(std::memory_order_relaxed);
  return static_cast<double>(total);
}

Load::~Load() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  if (counts_ != nullptr) munmap(counts_, kCountsBytes);
  if (!store_.empty()) unlink(store_.c_str());
}

}  // namespace plexus::bench
