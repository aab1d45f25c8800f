// bench --elastic: the elastic communicator next to the cpu:tcp process group, on loopback.
//
//   bazel run //tools:bench -- --elastic [--ranks=4] [--tensors=32] [--tensor-bytes=4M]
//       [--max-in-flight=1,4,16] [--iters=5] [--warmup=1] [--kills=5] [--json=FILE]
//
// Throughput: busbw (nccl-tests' all-reduce factor 2 (n - 1) / n) of one
// all_reduce_multiple_with_retry call over `tensors` float32 tensors, at each max_in_flight,
// and of the process group running the same all-reduces (all issued, then waited for). Each
// timed call starts once every peer is ready (a barrier after the tensors are reset); times
// are peer 0's medians over the iterations (this shared machine's outliers move a mean).
// Recovery: peers run such calls back to back; one is SIGKILLed at a random moment and the
// time until every survivor completed a call over the remaining peers is reported.
// Every result is checked; exits non-zero on a wrong element or a failure.
#include "tools/bench_elastic.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "frontend/dispatch/init.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_node.h"

namespace plexus::bench {
namespace {

using elastic::Communicator;
using elastic::ReduceOpDescriptor;

struct ElasticFlags {
  int ranks = 4;
  int tensors = 32;
  int64_t tensor_bytes = 4 << 20;
  std::vector<int> max_in_flight = {1, 4, 16};
  int iters = 5;
  int warmup = 1;
  int kills = 5;
  std::string json;
};

absl::Status Parse(int argc, char** argv, ElasticFlags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--elastic") continue;
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (name == "--ranks") {
      ok = ok && absl::SimpleAtoi(value, &flags.ranks) && flags.ranks >= 2 && flags.ranks <= 16;
    } else if (name == "--tensors") {
      ok = ok && absl::SimpleAtoi(value, &flags.tensors) && flags.tensors >= 1 &&
           flags.tensors <= 1024;
    } else if (name == "--tensor-bytes") {
      int64_t scale = 1;
      std::string number = value;
      if (!number.empty() && (number.back() == 'K' || number.back() == 'M')) {
        scale = number.back() == 'K' ? 1 << 10 : 1 << 20;
        number.pop_back();
      }
      ok = ok && absl::SimpleAtoi(number, &flags.tensor_bytes) && flags.tensor_bytes >= 4;
      flags.tensor_bytes *= scale;
    } else if (name == "--max-in-flight") {
      flags.max_in_flight.clear();
      for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        int m = 0;
        ok = ok && absl::SimpleAtoi(item, &m) && m >= 1;
        flags.max_in_flight.push_back(m);
      }
      ok = ok && !flags.max_in_flight.empty();
    } else if (name == "--iters") {
      ok = ok && absl::SimpleAtoi(value, &flags.iters) && flags.iters >= 1;
    } else if (name == "--warmup") {
      ok = ok && absl::SimpleAtoi(value, &flags.warmup) && flags.warmup >= 0;
    } else if (name == "--kills") {
      ok = ok && absl::SimpleAtoi(value, &flags.kills) && flags.kills >= 0;
    } else if (name == "--json") {
      flags.json = value;
    } else {
      ok = false;
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad flag '", arg,
                       "'; --elastic takes --ranks=N (2..16) --tensors=N --tensor-bytes=4M "
                       "--max-in-flight=1,4,16 --iters=N --warmup=N --kills=N --json=FILE"));
    }
  }
  return absl::OkStatus();
}

// A forked process that writes lines to the parent.
struct Child {
  pid_t pid;
  FILE* out;  // Parent's read end.
};

Child Spawn(const std::function<int(FILE*)>& body) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, nullptr};
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    FILE* out = fdopen(fds[1], "w");
    const int code = body(out);
    fclose(out);
    _exit(code);
  }
  close(fds[1]);
  return {pid, fdopen(fds[0], "r")};
}

std::unique_ptr<Communicator> JoinedPeer(int port, int world) {
  elastic::CommunicatorOptions options;
  options.master_address = absl::StrCat("127.0.0.1:", port);
  options.operation_timeout = absl::Seconds(60);
  options.accept_timeout = absl::Seconds(60);
  auto comm = Communicator::Create(options);
  if (!comm.ok() || !(*comm)->Connect(absl::Seconds(60)).ok()) return nullptr;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    auto size = (*comm)->GetAttribute(elastic::Attribute::kGlobalWorldSize);
    if (!size.ok()) return nullptr;
    if (*size >= world) return std::move(comm).value();
    if (!(*comm)->UpdateTopology().ok()) return nullptr;
    usleep(2000);
  }
  return nullptr;
}

// The tensors of one call, filled with ones; Check counts elements != `want`.
struct Batch {
  std::vector<std::vector<float>> tensors;
  std::vector<ReduceOpDescriptor> ops;

  Batch(int count, int64_t bytes)
      : tensors(count, std::vector<float>(static_cast<size_t>(bytes / 4))), ops(count) {
    for (int t = 0; t < count; ++t) {
      ops[t].send = ops[t].recv = tensors[t].data();
      ops[t].descriptor.count = static_cast<int64_t>(tensors[t].size());
      ops[t].descriptor.tag = static_cast<uint64_t>(t);
    }
  }
  void Reset() {
    for (auto& t : tensors) std::fill(t.begin(), t.end(), 1.0f);
  }
  int64_t Wrong(float want) const {
    int64_t wrong = 0;
    for (const auto& t : tensors)
      wrong += std::count_if(t.begin(), t.end(), [&](float v) { return v != want; });
    return wrong;
  }
};

// The middle of `values` (the mean of the middle two for an even count).
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The elastic communicator's all_reduce_multiple_with_retry at each --max_in_flight; false
// on a failure.
bool MeasureElastic(const ElasticFlags& flags, elastic::Communicator& comm, int peer, Batch& batch,
                    FILE* out) {
  for (int mif : flags.max_in_flight) {
    std::vector<double> times;
    int64_t wrong = 0;
    for (int i = 0; i < flags.warmup + flags.iters; ++i) {
      batch.Reset();
      // Peers reset and check their tensors at different speeds: line them up first, so the
      // time is the call's, not the wait for the slowest peer's preparation.
      float token = 0;
      elastic::ReduceDescriptor line_up;
      line_up.count = 1;
      line_up.tag = static_cast<uint64_t>(flags.tensors);
      if (!comm.AllReduce(&token, &token, line_up).ok()) return false;
      const absl::Time start = absl::Now();
      auto info = comm.AllReduceMultipleWithRetry(batch.ops, mif);
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (!info.ok()) {
        fprintf(stderr, "bench --elastic: peer %d: %s\n", peer, info.status().ToString().c_str());
        return false;
      }
      wrong += batch.Wrong(static_cast<float>(info->local_world_size));
      if (i >= flags.warmup) times.push_back(seconds);
    }
    fprintf(out, "elastic_mif=%d %.6f %lld\n", mif, Median(times), static_cast<long long>(wrong));
  }
  return true;
}

// The same tensors all-reduced on a process group ("pg"), for comparison; false on a failure.
bool MeasureGroup(const ElasticFlags& flags, int peer, const std::string& store_dir, Batch& batch,
                  FILE* out) {
  InitOptions options;
  options.backend = "cpu:tcp";
  options.init_method = absl::StrCat("file://", store_dir, "/pg");
  options.rank = peer;
  options.world_size = flags.ranks;
  auto group = InitProcessGroup(options);
  if (!group.ok()) return false;
  std::vector<double> times;
  int64_t wrong = 0;
  for (int i = 0; i < flags.warmup + flags.iters; ++i) {
    batch.Reset();
    auto barrier = (*group)->Barrier();  // As MeasureElastic's line-up.
    if (!barrier.ok() || !(*barrier)->Wait(absl::Minutes(5)).ok()) return false;
    const absl::Time start = absl::Now();
    std::vector<WorkPtr> works;
    for (auto& t : batch.tensors) {
      auto work = (*group)->AllReduce(
          {Tensor::Flat(t.data(), DType::kFloat32, static_cast<int64_t>(t.size()))});
      if (!work.ok()) return false;
      works.push_back(*work);
    }
    for (const WorkPtr& work : works) {
      if (!work->Wait(absl::Minutes(5)).ok()) return false;
    }
    if (i >= flags.warmup) times.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    wrong += batch.Wrong(static_cast<float>(flags.ranks));
  }
  fprintf(out, "pg %.6f %lld\n", Median(times), static_cast<long long>(wrong));
  (void)(*group)->Shutdown(absl::Minutes(1));
  return true;
}

// One peer of the throughput run: prints "<mode> <median seconds per call> <wrong>" lines.
int ThroughputPeer(const ElasticFlags& flags, int port, int peer, const std::string& store_dir,
                   FILE* out) {
  auto comm = JoinedPeer(port, flags.ranks);
  if (!comm) return 1;
  Batch batch(flags.tensors, flags.tensor_bytes);
  if (!MeasureElastic(flags, *comm, peer, batch, out)) return 1;
  comm.reset();
  return MeasureGroup(flags, peer, store_dir, batch, out) ? 0 : 1;
}

// One peer of the recovery run: calls back to back; prints "done <world> <unix ns>" per call.
int RecoveryPeer(const ElasticFlags& flags, int port, FILE* out) {
  auto comm = JoinedPeer(port, flags.ranks);
  if (!comm) return 1;
  Batch batch(flags.tensors, flags.tensor_bytes);
  while (true) {
    batch.Reset();
    auto info = comm->AllReduceMultipleWithRetry(batch.ops, 4);
    if (!info.ok()) return 1;
    const int64_t wrong = batch.Wrong(static_cast<float>(info->local_world_size));
    fprintf(out, "done %lld %lld %lld\n", static_cast<long long>(info->local_world_size),
            static_cast<long long>(absl::ToUnixNanos(absl::Now())), static_cast<long long>(wrong));
    fflush(out);
  }
}

// Starts an elastic master in a child; its port, or 0 if it did not start.
Child StartMaster(int& port) {
  Child master = Spawn([](FILE* out) {
    elastic::MasterNodeOptions options;
    options.listen_address = "127.0.0.1:0";
    auto node = elastic::MasterNode::Create(options);
    if (!node.ok() || !(*node)->Run().ok()) return 1;
    fprintf(out, "%d\n", (*node)->port());
    fflush(out);
    (void)(*node)->AwaitTermination();
    return 0;
  });
  if (master.pid < 0 || fscanf(master.out, "%d", &port) != 1) port = 0;
  return master;
}

// The throughput table: every mode's time on peer 0, busbw, and the ratio to the process
// group's; appends the rows to `json`.
void MeasureThroughput(const ElasticFlags& flags, int port, const char* dir, std::string& json,
                       bool& failed) {
  std::vector<Child> peers;
  for (int p = 0; p < flags.ranks; ++p) {
    peers.push_back(Spawn([&, p](FILE* out) { return ThroughputPeer(flags, port, p, dir, out); }));
  }
  // Peer 0's timings, the largest wrong count of any peer.
  std::vector<std::pair<std::string, double>> modes;
  std::map<std::string, long long> wrong;
  for (int p = 0; p < flags.ranks; ++p) {
    char mode[64];
    double seconds;
    long long bad;
    while (fscanf(peers[p].out, "%63s %lf %lld", mode, &seconds, &bad) == 3) {
      if (p == 0) modes.emplace_back(mode, seconds);
      wrong[mode] = std::max(wrong[mode], bad);
    }
    int status = 0;
    waitpid(peers[p].pid, &status, 0);
    fclose(peers[p].out);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  const double bytes = static_cast<double>(flags.tensors) * flags.tensor_bytes;
  const double factor = 2.0 * (flags.ranks - 1) / flags.ranks;
  double pg_busbw = 0;
  for (const auto& [mode, seconds] : modes) {
    if (mode == "pg") pg_busbw = bytes * factor / seconds / 1e9;
  }
  std::sort(modes.begin(), modes.end(),
            [](const auto& a, const auto& b) { return (a.first == "pg") > (b.first == "pg"); });
  for (const auto& [mode, seconds] : modes) {
    const double busbw = bytes * factor / seconds / 1e9;
    const std::string label = mode == "pg" ? "cpu:tcp process group" : "retry " + mode.substr(8);
    printf("%-28s %10.2f %9.3f %7.2f %6lld\n", label.c_str(), seconds * 1e3, busbw,
           pg_busbw > 0 ? busbw / pg_busbw : 0.0, wrong[mode]);
    absl::StrAppend(&json, json.back() == '[' ? "" : ", ", "{\"mode\": \"", label,
                    "\", \"time_ms\": ", seconds * 1e3, ", \"busbw\": ", busbw, "}");
    failed |= wrong[mode] != 0;
  }
  fflush(stdout);
}

// One kill: a fresh set of peers, each completes two calls, one is SIGKILLed, and the time
// until the slowest survivor completed a call over the others (ms); nullopt on a failure.
std::optional<double> MeasureOneRecovery(const ElasticFlags& flags, int port, std::mt19937& random,
                                         bool& failed) {
  std::vector<Child> group;
  for (int p = 0; p < flags.ranks; ++p) {
    group.push_back(Spawn([&](FILE* out) { return RecoveryPeer(flags, port, out); }));
  }
  auto read_done = [&](int p, long long* world, long long* when) {
    long long bad = 0;
    const bool ok = fscanf(group[p].out, " done %lld %lld %lld", world, when, &bad) == 3;
    failed |= ok && bad != 0;
    return ok;
  };
  std::optional<double> slowest;
  long long world, when;
  std::vector<int> calls(flags.ranks, 0);
  for (int p = 0; p < flags.ranks && !failed; ++p) {
    while (calls[p] < 2 && read_done(p, &world, &when)) ++calls[p];
    failed |= calls[p] < 2;
  }
  if (!failed) {
    usleep(std::uniform_int_distribution<int>(0, 200000)(random));
    const int victim = std::uniform_int_distribution<int>(0, flags.ranks - 1)(random);
    const int64_t killed_at = absl::ToUnixNanos(absl::Now());
    kill(group[victim].pid, SIGKILL);
    double longest = 0;
    for (int p = 0; p < flags.ranks && !failed; ++p) {
      if (p == victim) continue;
      bool recovered = false;
      while (!recovered && read_done(p, &world, &when)) {
        recovered = world == flags.ranks - 1 && when > killed_at;
      }
      failed |= !recovered;
      longest = std::max(longest, (when - killed_at) / 1e6);
    }
    if (!failed) slowest = longest;
  }
  for (Child& c : group) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, nullptr, 0);
    fclose(c.out);
  }
  return slowest;
}

}  // namespace

int RunElasticBench(int argc, char** argv) {
  ElasticFlags flags;
  if (absl::Status status = Parse(argc, argv, flags); !status.ok()) {
    fprintf(stderr, "bench: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  int port = 0;
  Child master = StartMaster(port);
  if (port == 0) {
    fprintf(stderr, "bench: the elastic master did not start\n");
    return 1;
  }
  char dir_template[] = "/tmp/plexus-bench-elastic.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  const double mib = flags.tensor_bytes / 1048576.0;
  printf(
      "# plexus bench --elastic: %d peers on loopback, %d x %.3g MiB float32 per call, %d "
      "iterations after %d warmup (median times)\n",
      flags.ranks, flags.tensors, mib, flags.iters, flags.warmup);
  printf("%-28s %10s %9s %7s %6s\n", "mode", "time_ms", "busbw", "vs_pg", "wrong");
  fflush(stdout);
  bool failed = false;
  std::string json = "{\"throughput\": [";
  MeasureThroughput(flags, port, dir, json, failed);
  // Recovery: a fresh set of peers per kill.
  std::mt19937 random(static_cast<unsigned>(absl::ToUnixNanos(absl::Now())));
  std::vector<double> recoveries;
  for (int k = 0; k < flags.kills && !failed; ++k) {
    if (std::optional<double> ms = MeasureOneRecovery(flags, port, random, failed)) {
      recoveries.push_back(*ms);
    }
  }
  if (!recoveries.empty()) {
    std::vector<double> sorted = recoveries;
    std::sort(sorted.begin(), sorted.end());
    printf(
        "# SIGKILL of 1 of %d peers -> every survivor completed a call over %d: median %.0f ms, "
        "max %.0f ms (%zu kills; the call re-runs in full)\n",
        flags.ranks, flags.ranks - 1, sorted[sorted.size() / 2], sorted.back(), sorted.size());
    absl::StrAppend(&json, "], \"recovery_ms\": [");
    for (size_t i = 0; i < recoveries.size(); ++i) {
      absl::StrAppend(&json, i ? ", " : "", recoveries[i]);
    }
  }
  absl::StrAppend(&json, "]}\n");
  if (!flags.json.empty()) {
    if (FILE* f = fopen(flags.json.c_str(), "w")) {
      fputs(json.c_str(), f);
      fclose(f);
    }
  }
  kill(master.pid, SIGKILL);
  waitpid(master.pid, nullptr, 0);
  if (failed) printf("# FAILED: a peer failed or a result was wrong\n");
  return failed ? 1 : 0;
}

}  // namespace plexus::bench
