// plexus's benchmark, in the style of nccl-tests: forks local ranks on loopback, times each
// collective over a range of sizes on each CPU backend, checks every result, and prints one row
// per (backend, op, size) with time, algorithm bandwidth and bus bandwidth.
//
//   bazel run //tools:bench -- --elastic        # the elastic communicator (bench_elastic.cc)
//   bazel run //tools:bench -- --device=cuda    # NCCL on the GPUs here, one rank per GPU
//   bazel run //tools:bench -- --plot=busbw.png # also draws busbw against size (bench_plot.py)
//   bazel run //tools:bench -- --ops=new_group  # forming a subgroup of every rank, per group
//   bazel run //tools:bench                     # 4 ranks, float32 all_reduce, 1K..64M, all CPU
//   backends bazel run //tools:bench -- --backends=cpu:tcp,cpu:gloo --ops=all_reduce,all_gather
//       --ranks=8 --sizes=1K:16M --dtype=bfloat16 --iters=20 --warmup=5 --json=/tmp/bench.json
//
// Backends that run under a launcher (cpu:mpi) are measured after the forked ones: the bench
// starts itself under `mpirun -np RANKS` (with --mpirun-args, by default "--mca btl tcp,self
// --mca btl_tcp_if_include lo" so that MPI, like the others, moves bytes over loopback TCP;
// Open MPI 5, Debian 13's, leaves loopback out unless told), and each rank writes its
// samples to a file the parent reads.
//
// Exits non-zero if any element is wrong or any rank fails.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/interface/backend_registry.h"
#include "base/core/byte_size.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"
#include "base/net/interfaces.h"
#include "frontend/dispatch/backend_string.h"
#include "frontend/dispatch/init.h"
#include "tests/testing/tls_certificates.h"
#include "tools/bench_anchor.h"
#include "tools/bench_elastic.h"
#include "tools/bench_flags.h"
#include "tools/bench_load.h"
#include "tools/bench_report.h"
#ifdef PLEXUS_BENCH_CUDA
#include "tests/testing/cuda_memory.h"
#endif
#include "tools/bench_ops.h"

namespace plexus::bench {
namespace {

// One measurement from one rank, sent to the parent over a pipe as a text line.
struct Sample {
  double time_us = 0;
  int64_t wrong = 0;
  int64_t bytes = 0;
  int64_t count = 0;
  double bus_factor = 1;
  int64_t rss_growth = 0;  // Peak resident bytes over the level before the first operation.
  std::string error;
};

std::string Encode(const Sample& s) {
  return absl::StrFormat("%.3f %d %d %d %.6f %d %s\n", s.time_us, s.wrong, s.bytes, s.count,
                         s.bus_factor, s.rss_growth, s.error.empty() ? "-" : s.error);
}

// A byte count from /proc/self/status ("VmRSS", "VmHWM"); 0 if unreadable.
int64_t ProcStatusBytes(absl::string_view field) {
  FILE* status = fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  int64_t kib = 0;
  while (fgets(line, sizeof(line), status) != nullptr) {
    absl::string_view text(line);
    if (absl::ConsumePrefix(&text, field) && absl::ConsumePrefix(&text, ":")) {
      text = absl::StripAsciiWhitespace(text);
      absl::ConsumeSuffix(&text, "kB");
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &kib);
      break;
    }
  }
  fclose(status);
  return kib * 1024;
}

// Restarts the peak-RSS high-water mark at the current level (Linux clear_refs "5").
void ResetPeakRss() {
  FILE* refs = fopen("/proc/self/clear_refs", "w");
  if (refs == nullptr) return;
  fputs("5", refs);
  fclose(refs);
}

Sample Decode(absl::string_view line) {
  Sample s;
  std::vector<std::string> parts =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(line), absl::MaxSplits(' ', 6));
  if (parts.size() < 7) {
    s.error = "rank exited without reporting";
    return s;
  }
  (void)absl::SimpleAtod(parts[0], &s.time_us);
  (void)absl::SimpleAtoi(parts[1], &s.wrong);
  (void)absl::SimpleAtoi(parts[2], &s.bytes);
  (void)absl::SimpleAtoi(parts[3], &s.count);
  (void)absl::SimpleAtod(parts[4], &s.bus_factor);
  (void)absl::SimpleAtoi(parts[5], &s.rss_growth);
  if (parts[6] != "-") s.error = parts[6];
  return s;
}

absl::Status RunOnce(Runner& runner) {
  auto work = runner.issue();
  if (!work.ok()) return work.status();
  return (*work)->Wait(absl::Minutes(5));
}

// The timed iterations. On CUDA, as nccl-tests: every iteration issued back to back on the
// stream, then waited for all at once.
absl::Status RunTimed(Runner& runner, int iters, Device device) {
  if (device.type != DeviceType::kCuda) {
    for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(RunOnce(runner));
    return absl::OkStatus();
  }
  std::vector<WorkPtr> works;
  for (int i = 0; i < iters; ++i) {
    ASSIGN_OR_RETURN(WorkPtr work, runner.issue());
    works.push_back(std::move(work));
  }
  return WaitAll(works, absl::Minutes(5));
}

Sample Measure(ProcessGroup& group, const std::string& op, const Flags& flags, int64_t size,
               Device device) {
  Sample sample;
  auto runner = MakeRunner(op, group, flags.dtype, size, device, flags.blocking);
  if (!runner.ok()) {
    sample.error = std::string(runner.status().message());
    return sample;
  }
  sample.bytes = runner->bytes;
  sample.count = runner->count;
  sample.bus_factor = runner->bus_factor;
  runner->reset();
  ResetPeakRss();
  const int64_t rss_before = ProcStatusBytes("VmRSS");
  if (absl::Status status = RunOnce(*runner); !status.ok()) {
    sample.error = std::string(status.message());
    return sample;
  }
  sample.wrong = runner->count_wrong();
  // Warm up after the barrier: ranks leave a barrier up to a wake-up apart (one that arrived
  // early may sleep in it), and the first operations absorb that skew, which the timed ones
  // would otherwise carry (hundreds of microseconds here: several us per 1 KiB iteration).
  auto barrier = group.Barrier();
  if (barrier.ok()) (void)(*barrier)->Wait(absl::Minutes(5));
  for (int i = 0; i < flags.warmup; ++i) {
    if (absl::Status status = RunOnce(*runner); !status.ok()) {
      sample.error = std::string(status.message());
      return sample;
    }
  }
  const absl::Time start = absl::Now();
  if (absl::Status status = RunTimed(*runner, flags.iters, device); !status.ok()) {
    sample.error = std::string(status.message());
    return sample;
  }
  sample.time_us = absl::ToDoubleMicroseconds(absl::Now() - start) / flags.iters;
  sample.rss_growth = std::max<int64_t>(0, ProcStatusBytes("VmHWM") - rss_before);
  return sample;
}

// The init method of the launcher `backend` runs under ("mpi://"), or empty.
std::string LauncherInitMethod(const std::string& backend) {
  auto mapping = ParseBackendString(backend, BackendRegistry::Global());
  if (!mapping.ok() || mapping->empty()) return "";
  auto registration = BackendRegistry::Global().Find((*mapping)[0].backend);
  return registration.ok() ? registration->launcher_init_method : "";
}

// Runs in each rank: every backend, op and size in order, one line per measurement. Forked
// ranks (rank >= 0) meet through a FileStore in `dir`; ranks started by a launcher (rank < 0)
// through its own init method.
int RunRank(int rank, const Flags& flags, const std::vector<std::string>& backends,
            const std::string& dir, FILE* out) {
  const bool launched = rank < 0;
  Device device = Device::Cpu();
  if (flags.device == DeviceType::kCuda) {
    device = Device::Cuda(std::max(rank, 0) % std::max(flags.cuda_devices, 1));
#ifdef PLEXUS_BENCH_CUDA
    absl::Status status = testing::UseDeviceBuffers(device.index);
#else
    absl::Status status = absl::FailedPreconditionError("no CUDA device: built without CUDA");
#endif
    if (!status.ok()) {
      fprintf(stderr, "bench rank %d: %s\n", rank, std::string(status.message()).c_str());
      return 1;
    }
  }
  for (size_t b = 0; b < backends.size(); ++b) {
    InitOptions options;
    options.backend = backends[b];
    if (!launched) {
      options.init_method = absl::StrCat("file://", dir, "/store.", b);
      options.rank = rank;
      options.world_size = flags.ranks;
    } else {
      options.init_method = LauncherInitMethod(backends[b]);
    }
    options.timeout = absl::Minutes(5);
    auto group = InitProcessGroup(options);
    const int group_rank = group.ok() ? (*group)->rank() : rank;
    for (const std::string& op : flags.ops) {
      const std::vector<int64_t> sizes = TakesNoSize(op) ? std::vector<int64_t>{0} : flags.sizes;
      for (size_t i = 0; i < sizes.size(); ++i) {
        Sample sample;
        if (!group.ok()) {
          sample.error = std::string(group.status().message());
        } else {
          if (group_rank == 0) {
            fprintf(stderr, "[bench] %s %s %lld bytes (%zu/%zu)\n", backends[b].c_str(), op.c_str(),
                    static_cast<long long>(sizes[i]), i + 1, sizes.size());
          }
          sample = Measure(**group, op, flags, sizes[i], device);
        }
        std::replace(sample.error.begin(), sample.error.end(), '\n', ' ');
        fputs(Encode(sample).c_str(), out);
        fflush(out);
      }
    }
    if (group.ok()) (void)(*group)->Shutdown(absl::Minutes(1));
  }
  return 0;
}

// Reads one sample per rank for each (backend, op, size) from `inputs`, prints the rows and
// appends them to `rows`. `launch_error` marks rows whose samples are missing.
// `load`: the --load the samples ran under (empty: quiet).
void ReadRows(const Flags& flags, const std::vector<std::string>& backends,
              const std::vector<FILE*>& inputs, const std::string& load, std::vector<Row>& rows,
              bool& failed, const std::string& launch_error = "") {
  for (const std::string& backend : backends) {
    for (const std::string& op : flags.ops) {
      const size_t cases = TakesNoSize(op) ? 1 : flags.sizes.size();
      for (size_t i = 0; i < cases; ++i) {
        const bool encrypted = flags.tls && absl::StrContains(backend, "tcp");
        const std::string label =
            absl::StrCat(backend, encrypted ? "+tls" : "", flags.blocking ? "+blocking" : "");
        Row row;
        row.backend = label;
        row.op = op;
        row.ranks = flags.ranks;
        row.dtype = std::string(DTypeName(flags.dtype));
        row.load = load;
        double bus_factor = 1;
        for (FILE* in : inputs) {
          char line[4096] = {0};
          if (fgets(line, sizeof(line), in) == nullptr) {
            if (row.error.empty()) {
              row.error = launch_error.empty() ? "a rank reported nothing" : launch_error;
            }
            continue;
          }
          Sample sample = Decode(line);
          row.time_us = std::max(row.time_us, sample.time_us);  // The slowest rank sets the pace.
          row.wrong += sample.wrong;
          row.rss_growth = std::max(row.rss_growth, sample.rss_growth);
          row.bytes = sample.bytes;
          row.count = sample.count;
          bus_factor = sample.bus_factor;
          if (!sample.error.empty() && row.error.empty()) row.error = sample.error;
        }
        if (row.time_us > 0) {
          row.algbw = row.bytes / (row.time_us * 1e3);  // bytes/us = MB/s; /1e3 = GB/s.
          row.busbw = row.algbw * bus_factor;
        }
        failed |= row.wrong > 0 || !row.error.empty();
        const std::string shown = load.empty() ? row.backend : absl::StrCat(row.backend, "@", load);
        printf("%-10s %-15s %5d %12lld %11lld %-8s %11.1f %9.3f %9.3f %6lld %8.1f%s%s\n",
               shown.c_str(), row.op.c_str(), row.ranks, static_cast<long long>(row.bytes),
               static_cast<long long>(row.count), row.dtype.c_str(), row.time_us, row.algbw,
               row.busbw, static_cast<long long>(row.wrong), row.rss_growth / 1048576.0,
               row.error.empty() ? "" : "  ERROR: ", row.error.c_str());
        fflush(stdout);
        rows.push_back(row);
      }
    }
  }
}

// Starts this binary under mpirun for `backends`, with the caller's flags, and waits for it.
absl::Status RunLaunched(const Flags& flags, const std::vector<std::string>& backends, int argc,
                         char** argv, const std::string& dir) {
  char exe[4096] = {0};
  if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) <= 0) {
    return absl::InternalError("cannot find this binary (/proc/self/exe)");
  }
  std::vector<std::string> args = {"mpirun", "-np", absl::StrCat(flags.ranks), "--oversubscribe"};
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  for (absl::string_view arg : absl::StrSplit(flags.mpirun_args, ' ', absl::SkipEmpty())) {
    args.emplace_back(arg);
  }
  for (std::string& arg : net::MpirunInterfaceArgs(GetEnv)) args.push_back(std::move(arg));
  args.push_back(exe);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    // The parent measures one rank count at a time and runs the load and the anchor itself.
    if (absl::StartsWith(arg, "--backends=") || absl::StartsWith(arg, "--json=") ||
        absl::StartsWith(arg, "--mpirun-args=") || absl::StartsWith(arg, "--ranks=") ||
        absl::StartsWith(arg, "--load=") || absl::StartsWith(arg, "--anchor=") ||
        absl::StartsWith(arg, "--plot=")) {
      continue;
    }
    args.emplace_back(arg);
  }
  args.push_back(absl::StrCat("--ranks=", flags.ranks));
  args.push_back("--backends=" + absl::StrJoin(backends, ","));
  args.push_back("--launched-output=" + dir);
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> pointers;
    for (std::string& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    execvp("mpirun", pointers.data());
    perror("bench: execvp mpirun");
    _exit(127);
  }
  if (pid < 0) return absl::InternalError("fork failed");
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "mpirun for ", absl::StrJoin(backends, ","), " failed (",
      WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                        : absl::StrCat("signal ", WTERMSIG(status)),
      WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "; is openmpi-bin installed?" : "", ")"));
}

// One core's memcpy bandwidth at each size of the run (best of several timed batches, each
// long enough to time): rows with backend and op "memcpy".
std::vector<Row> MeasureMemcpy(const Flags& flags) {
  std::vector<Row> rows;
  for (int64_t bytes : flags.sizes) {
    std::vector<char> from(bytes, 1), to(bytes, 2);
    const int64_t repeats = std::max<int64_t>(1, (64 << 20) / std::max<int64_t>(bytes, 1));
    double best_us = 1e300;
    for (int batch = 0; batch < 5; ++batch) {
      const absl::Time start = absl::Now();
      for (int64_t i = 0; i < repeats; ++i) {
        std::memcpy(to.data(), from.data(), bytes);
        // Keep the copy: the compiler may not drop what the next round reads.
        asm volatile("" : : "r"(to.data()) : "memory");
      }
      best_us = std::min(best_us, absl::ToDoubleMicroseconds(absl::Now() - start) / repeats);
    }
    const double gbps = best_us > 0 ? bytes / best_us / 1e3 : 0;
    Row row;
    row.backend = row.op = "memcpy";
    row.ranks = 1;
    row.bytes = row.count = bytes;
    row.dtype = "bytes";
    row.time_us = best_us;
    row.algbw = row.busbw = gbps;
    rows.push_back(row);
  }
  return rows;
}

// Runs tools/bench_plot.py: found in the bench's runfiles, beside it (in a test's runfiles), or
// in the workspace under `bazel run`.
bool Plot(const char* argv0, const std::string& json, const std::string& out) {
  const std::string binary = argv0;
  const std::string beside = binary.substr(0, binary.rfind('/') + 1) + "bench_plot.py";
  std::vector<std::string> candidates = {
      absl::StrCat(binary, ".runfiles/plexus/tools/bench_plot.py"), beside};
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    candidates.push_back(absl::StrCat(workspace, "/tools/bench_plot.py"));
  }
  for (const std::string& script : candidates) {
    if (access(script.c_str(), R_OK) != 0) continue;
    const std::string command =
        absl::StrCat("/usr/bin/python3 '", script, "' --out '", out, "' '", json, "'");
    fflush(stdout);  // The tables first: the script writes to the same stdout.
    if (system(command.c_str()) == 0) return true;
    fprintf(stderr, "bench: drawing %s failed (is python3-matplotlib installed?)\n", out.c_str());
    return false;
  }
  fprintf(stderr, "bench: tools/bench_plot.py not found beside the bench\n");
  return false;
}

// The forked backends' ranks, each a child of the bench writing its samples to a pipe.
void MeasureForked(const Flags& flags, const std::vector<std::string>& forked,
                   const std::string& dir, const std::string& load, std::vector<Row>& rows,
                   bool& failed) {
  std::vector<pid_t> pids;
  std::vector<FILE*> pipes;
  for (int rank = 0; rank < flags.ranks; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) {
      failed = true;
      break;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      FILE* out = fdopen(fds[1], "w");
      _exit(RunRank(rank, flags, forked, dir, out));
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fdopen(fds[0], "r"));
  }
  ReadRows(flags, forked, pipes, load, rows, failed);
  for (FILE* in : pipes) fclose(in);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // Each run makes a fresh group: the next rank count or phase must not meet this one's store.
  for (size_t b = 0; b < forked.size(); ++b) unlink(absl::StrCat(dir, "/store.", b).c_str());
}

// The backends that need a launcher: mpirun starts the ranks, each writes a file in `dir`.
void MeasureLaunched(const Flags& flags, const std::vector<std::string>& launched, int argc,
                     char** argv, const std::string& dir, const std::string& load,
                     std::vector<Row>& rows, bool& failed) {
  const absl::Status ran = RunLaunched(flags, launched, argc, argv, dir);
  std::vector<FILE*> files;
  for (int rank = 0; rank < flags.ranks; ++rank) {
    FILE* in = fopen(absl::StrCat(dir, "/rank.", rank).c_str(), "r");
    files.push_back(in != nullptr ? in : fopen("/dev/null", "r"));
  }
  ReadRows(flags, launched, files, load, rows, failed, ran.ok() ? "" : std::string(ran.message()));
  for (FILE* in : files) fclose(in);
  for (int rank = 0; rank < flags.ranks; ++rank) {
    unlink(absl::StrCat(dir, "/rank.", rank).c_str());
  }
  failed |= !ran.ok();
}

// --anchor: Open MPI's all_reduce through the reference script, as rows labelled openmpi-*.
void MeasureAnchor(const Flags& flags, const std::string& load, std::vector<Row>& rows,
                   bool& failed) {
  const absl::StatusOr<std::string> script = FindAnchorScript();
  const absl::StatusOr<std::vector<AnchorRow>> anchor =
      script.ok() ? RunAnchor(*script, flags.anchor, flags.ranks, flags.sizes)
                  : absl::StatusOr<std::vector<AnchorRow>>(script.status());
  if (!anchor.ok()) {
    fprintf(stderr, "bench: %s\n", std::string(anchor.status().message()).c_str());
    failed = true;
    return;
  }
  const std::string label = absl::StrCat("openmpi-", flags.anchor.substr(4));
  const std::string shown = load.empty() ? label : absl::StrCat(label, "@", load);
  for (const AnchorRow& a : *anchor) {
    Row row;
    row.backend = label;
    row.op = "all_reduce";
    row.ranks = flags.ranks;
    row.bytes = a.bytes;
    row.count = a.bytes / 4;
    row.dtype = "float32";
    row.time_us = a.time_us;
    row.algbw = a.algbw;
    row.busbw = a.busbw;
    row.load = load;
    printf("%-10s %-15s %5d %12lld %11lld %-8s %11.1f %9.3f %9.3f %6s %8s\n", shown.c_str(),
           "all_reduce", flags.ranks, static_cast<long long>(a.bytes),
           static_cast<long long>(a.bytes / 4), "float32", a.time_us, a.algbw, a.busbw, "-", "-");
    fflush(stdout);
    rows.push_back(row);
  }
}

// Measures every case at flags.ranks: the forked backends, those under a launcher, and with
// --anchor Open MPI through the reference script; rows are labelled with `load`.
void MeasurePhase(const Flags& flags, const std::vector<std::string>& forked,
                  const std::vector<std::string>& launched, int argc, char** argv,
                  const std::string& dir, const std::string& load, std::vector<Row>& rows,
                  bool& failed) {
  if (!forked.empty()) MeasureForked(flags, forked, dir, load, rows, failed);
  if (!launched.empty()) MeasureLaunched(flags, launched, argc, argv, dir, load, rows, failed);
  if (!flags.anchor.empty() && flags.dtype == DType::kFloat32 &&
      std::find(flags.ops.begin(), flags.ops.end(), "all_reduce") != flags.ops.end()) {
    MeasureAnchor(flags, load, rows, failed);
  }
}

// A rank started by mpirun for the launched backends: samples go to a file per rank.
int RunLaunchedRank(const Flags& flags) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const std::string path =
      absl::StrCat(flags.launched_output, "/rank.", rank != nullptr ? rank : "0");
  FILE* out = fopen(path.c_str(), "w");
  if (out == nullptr) return 1;
  const int code = RunRank(-1, flags, flags.backends, flags.launched_output, out);
  fclose(out);
  return code;
}

// --device=cuda: the devices there are (asked in a child: CUDA must not start in a process
// that forks ranks afterwards), and one rank per device up to 8 unless --ranks says otherwise.
absl::Status CountCudaDevices(Flags& flags) {
#ifdef PLEXUS_BENCH_CUDA
  absl::StatusOr<int> devices = testing::CudaDeviceCountInChild();
#else
  absl::StatusOr<int> devices = absl::FailedPreconditionError("no CUDA device: built without CUDA");
#endif
  if (!devices.ok()) return devices.status();
  flags.cuda_devices = *devices;
  // NCCL takes one device per rank.
  if (!flags.ranks_given) flags.rank_counts = {flags.ranks = std::min(*devices, 8)};
  return absl::OkStatus();
}

// --tls: a throwaway CA and certificate for this run, handed to the ranks through the
// environment.
absl::Status SetUpTls(const char* dir) {
  RETURN_IF_ERROR(testing::WriteTlsCertificates(dir, {"rank"}));
  setenv("PLEXUS_TLS_CERT", absl::StrCat(dir, "/rank.pem").c_str(), 1);
  setenv("PLEXUS_TLS_KEY", absl::StrCat(dir, "/rank.key").c_str(), 1);
  setenv("PLEXUS_TLS_CA", absl::StrCat(dir, "/ca.pem").c_str(), 1);
  return absl::OkStatus();
}

void PrintHeader(const Flags& flags) {
  printf("# plexus bench: %s ranks on loopback, dtype %s, %d iterations after %d warmup%s%s%s\n",
         absl::StrJoin(flags.rank_counts, ",").c_str(), std::string(DTypeName(flags.dtype)).c_str(),
         flags.iters, flags.warmup,
         flags.device == DeviceType::kCuda ? ", tensors in CUDA device memory" : "",
         flags.tls ? ", TLS 1.3 (mutual, P-256) on plexus's connections" : "",
         flags.load ? absl::StrCat("; each case quiet, then beside load ", flags.load->label(),
                                   " (rows @", flags.load->label(), ")")
                          .c_str()
                    : "");
  const char* transport = ReadEnvironment("PLEXUS_TRANSPORT");
  if (flags.tls && (transport == nullptr || std::string(transport) != "tcp")) {
    printf(
        "# note: same-host tcp ranks exchange data through shared memory, which TLS does not "
        "cover; PLEXUS_TRANSPORT=tcp measures TLS itself\n");
  }
  printf("%-10s %-15s %5s %12s %11s %-8s %11s %9s %9s %6s %8s\n", "backend", "op", "ranks", "bytes",
         "count", "dtype", "time_us", "algbw", "busbw", "wrong", "rss_mib");
  fflush(stdout);
}

// Every rank count, round and (with --load) quiet and loaded phase, into `rows`.
void MeasureAll(Flags& flags, const std::vector<std::string>& forked,
                const std::vector<std::string>& launched, int argc, char** argv, const char* dir,
                std::vector<Row>& rows, bool& failed) {
  for (int ranks : flags.rank_counts) {
    flags.ranks = ranks;
    // Quiet first, then (with --load) the same cases again beside the load; with --rounds the
    // two alternate, so that each round's comparisons are made in the same minutes.
    for (int round = 1; round <= flags.rounds; ++round) {
      if (flags.rounds > 1) printf("# round %d of %d, %d ranks\n", round, flags.rounds, ranks);
      for (int loaded = 0; loaded <= (flags.load ? 1 : 0); ++loaded) {
        std::unique_ptr<Load> load;
        const std::string load_label = loaded ? flags.load->label() : "";
        if (loaded) {
          auto started = Load::Start(*flags.load, dir);
          if (!started.ok()) {
            fprintf(stderr, "bench: %s\n", std::string(started.status().message()).c_str());
            failed = true;
            return;
          }
          load = std::move(started).value();
        }
        const size_t first = rows.size();
        MeasurePhase(flags, forked, launched, argc, argv, dir, load_label, rows, failed);
        for (size_t i = first; flags.rounds > 1 && i < rows.size(); ++i) rows[i].round = round;
        if (load) {
          printf("# load %s did %.0f units of work meanwhile\n", load_label.c_str(),
                 load->WorkDone());
        }
      }
    }
  }
}

// The summaries after the rows, the JSON and the plot; false when one could not be written.
bool Report(const Flags& flags, std::vector<Row>& rows, const char* program, const char* dir) {
  if (flags.rounds > 1) {
    PrintRounds(rows, stdout);
    AppendMedians(rows);
  }
  PrintContention(rows, stdout);
  if (flags.rank_counts.size() > 1) FitAndPrintScaling(rows, stdout);
  if (!flags.plot.empty()) {
    // The ceiling a same-host transport is judged against, measured at each size here.
    const std::vector<Row> memcpy_rows = MeasureMemcpy(flags);
    rows.insert(rows.end(), memcpy_rows.begin(), memcpy_rows.end());
  }
  std::string json_path = flags.json;
  if (json_path.empty() && !flags.plot.empty()) json_path = absl::StrCat(dir, "/plot.json");
  if (!json_path.empty() && !WriteJson(json_path, rows)) {
    fprintf(stderr, "bench: cannot write %s\n", json_path.c_str());
    return false;
  }
  return flags.plot.empty() || Plot(program, json_path, flags.plot);
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--elastic") return RunElasticBench(argc, argv);
  }
  Flags flags;
  if (absl::Status status = ParseFlags(argc, argv, flags); !status.ok()) {
    fprintf(stderr, "bench: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  if (flags.backends.empty()) {
    fprintf(stderr, "bench: no CPU backend is registered\n");
    return 2;
  }
  if (!flags.launched_output.empty()) return RunLaunchedRank(flags);
  if (flags.device == DeviceType::kCuda) {
    if (absl::Status counted = CountCudaDevices(flags); !counted.ok()) {
      fprintf(stderr, "bench: --device=cuda: %s\n", std::string(counted.message()).c_str());
      return 1;
    }
  }
  std::vector<std::string> forked, launched;
  for (const std::string& backend : flags.backends) {
    (LauncherInitMethod(backend).empty() ? forked : launched).push_back(backend);
  }
  char dir_template[] = "/tmp/plexus-bench.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  if (flags.tls) {
    if (absl::Status made = SetUpTls(dir); !made.ok()) {
      fprintf(stderr, "bench: --tls: %s\n", std::string(made.message()).c_str());
      return 1;
    }
  }
  PrintHeader(flags);
  std::vector<Row> rows;
  bool failed = false;
  MeasureAll(flags, forked, launched, argc, argv, dir, rows, failed);
  const bool reported = Report(flags, rows, argv[0], dir);
  std::string cleanup = absl::StrCat("rm -rf ", dir);
  if (system(cleanup.c_str()) != 0) fprintf(stderr, "bench: could not remove %s\n", dir);
  if (!reported) failed = true;
  if (failed) fprintf(stderr, "bench: FAILED (wrong elements or errors above)\n");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace plexus::bench

int main(int argc, char** argv) { return plexus::bench::Main(argc, argv); }
