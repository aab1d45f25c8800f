#include "tools/bench_flags.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "backends/interface/backend_registry.h"
#include "base/core/byte_size.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"
#include "tools/bench_ops.h"

namespace plexus::bench {
namespace {

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(text));
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  }
  return static_cast<int64_t>(bytes);
}

// "1K,16M" is a list; "1K:64M" doubles from the first to the last.
absl::StatusOr<std::vector<int64_t>> ParseSizes(absl::string_view text) {
  std::vector<int64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t colon = item.find(':');
    if (colon == absl::string_view::npos) {
      auto size = ParseBytes(item);
      if (!size.ok()) return size.status();
      sizes.push_back(*size);
      continue;
    }
    auto low = ParseBytes(item.substr(0, colon));
    auto high = ParseBytes(item.substr(colon + 1));
    if (!low.ok()) return low.status();
    if (!high.ok()) return high.status();
    for (int64_t s = std::max<int64_t>(*low, 1); s <= *high; s *= 2) sizes.push_back(s);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("no sizes given");
  return sizes;
}

// A relative path as the caller meant it: `bazel run` starts the bench in its runfiles, and
// says where the caller was in BUILD_WORKING_DIRECTORY.
std::string InCallersDirectory(const std::string& path) {
  const char* caller = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || caller == nullptr || *caller == '\0') return path;
  return absl::StrCat(caller, "/", path);
}

// --ops=a,b,...|all: each a known op (or an extra one, asked for by name).
absl::Status ParseOps(const std::string& value, Flags& flags) {
  flags.ops = absl::StrSplit(value, ',', absl::SkipEmpty());
  if (value == "all") flags.ops = KnownOps();
  for (const std::string& op : flags.ops) {
    if (std::find(KnownOps().begin(), KnownOps().end(), op) == KnownOps().end() &&
        std::find(ExtraOps().begin(), ExtraOps().end(), op) == ExtraOps().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown op '", op, "'; known: ", absl::StrJoin(KnownOps(), ", "), ", ",
                       absl::StrJoin(ExtraOps(), ", "), ", all"));
    }
  }
  return absl::OkStatus();
}

// --ranks=N|2,4,8: a list sweeps.
absl::Status ParseRankCounts(const std::string& value, Flags& flags) {
  flags.rank_counts.clear();
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    int ranks = 0;
    if (!absl::SimpleAtoi(item, &ranks) || ranks < 1 || ranks > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ranks: '", item, "' is not 1..64 (a list sweeps: --ranks=2,4,8)"));
    }
    flags.rank_counts.push_back(ranks);
  }
  if (flags.rank_counts.empty()) return absl::InvalidArgumentError("--ranks: no rank count");
  flags.ranks = flags.rank_counts.front();
  flags.ranks_given = true;
  return absl::OkStatus();
}

// Without --backends: nccl-tests' subject on cuda (a cpu-only string, staging, can be named with
// --backends), else every registered backend that serves cpu.
std::vector<std::string> DefaultBackends(DeviceType device) {
  std::vector<std::string> backends;
  if (device == DeviceType::kCuda) {
    if (BackendRegistry::Global().Find("nccl").ok()) backends.push_back("cpu:tcp,cuda:nccl");
    if (!backends.empty()) return backends;
  }
  for (const std::string& name : BackendRegistry::Global().Names()) {
    auto registration = BackendRegistry::Global().Find(name);
    const auto& devices = registration->devices;
    if (std::find(devices.begin(), devices.end(), DeviceType::kCpu) != devices.end()) {
      backends.push_back("cpu:" + name);
    }
  }
  return backends;
}

// The flags that say what is measured; false when `name` is not one of them.
absl::StatusOr<bool> ParseCaseFlag(const std::string& name, const std::string& value,
                                   Flags& flags) {
  if (name == "--backends") {
    flags.backends = absl::StrSplit(value, ',', absl::SkipEmpty());
  } else if (name == "--ops") {
    RETURN_IF_ERROR(ParseOps(value, flags));
  } else if (name == "--ranks") {
    RETURN_IF_ERROR(ParseRankCounts(value, flags));
  } else if (name == "--load") {
    ASSIGN_OR_RETURN(flags.load, ParseLoad(value));
  } else if (name == "--anchor") {
    if (value != "mpi-shm" && value != "mpi-tcp") {
      return absl::InvalidArgumentError(
          absl::StrCat("--anchor=", value, ": known anchors are mpi-shm and mpi-tcp"));
    }
    flags.anchor = value;
  } else if (name == "--device") {
    ASSIGN_OR_RETURN(flags.device, ParseDeviceType(value));
  } else if (name == "--sizes") {
    ASSIGN_OR_RETURN(flags.sizes, ParseSizes(value));
  } else if (name == "--dtype") {
    ASSIGN_OR_RETURN(flags.dtype, ParseDType(value));
  } else {
    return false;
  }
  return true;
}

// The flags that say how it is measured and reported; false when `name` is not one of them.
absl::StatusOr<bool> ParseRunFlag(const std::string& name, const std::string& value, bool has_value,
                                  Flags& flags) {
  if (name == "--rounds") {
    if (!absl::SimpleAtoi(value, &flags.rounds) || flags.rounds < 1 || flags.rounds > 20) {
      return absl::InvalidArgumentError(absl::StrCat("--rounds=", value, " must be 1..20"));
    }
  } else if (name == "--iters") {
    if (!absl::SimpleAtoi(value, &flags.iters) || flags.iters < 1) {
      return absl::InvalidArgumentError("--iters must be >= 1");
    }
  } else if (name == "--warmup") {
    if (!absl::SimpleAtoi(value, &flags.warmup) || flags.warmup < 0) {
      return absl::InvalidArgumentError("--warmup must be >= 0");
    }
  } else if (name == "--mpirun-args") {
    flags.mpirun_args = value;
  } else if (name == "--launched-output") {
    flags.launched_output = value;
  } else if (name == "--json") {
    flags.json = InCallersDirectory(value);
  } else if (name == "--plot") {
    flags.plot = InCallersDirectory(value);
  } else if (name == "--tls" && !has_value) {
    flags.tls = true;
  } else if (name == "--blocking" && !has_value) {
    flags.blocking = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::Status ParseFlags(int argc, char** argv, Flags& flags) {
  flags.sizes = *ParseSizes("1K:64M");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    ASSIGN_OR_RETURN(bool known, ParseCaseFlag(name, value, flags));
    if (!known) {
      ASSIGN_OR_RETURN(known, ParseRunFlag(name, value, eq != std::string::npos, flags));
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag '", arg,
          "'; flags: --backends=cpu:tcp,... --ops=all_reduce,...|all|new_group "
          "--ranks=N|2,4,8 --sizes=1K:64M|1K,16M --dtype=float32 --iters=N --warmup=N "
          "--json=FILE --mpirun-args='--mca btl tcp,self' --device=cpu|cuda --plot=FILE.png "
          "--tls --blocking --load=spin:N|compute:N|comm:N --anchor=mpi-shm|mpi-tcp --rounds=N"));
    }
  }
  if (flags.backends.empty()) flags.backends = DefaultBackends(flags.device);
  return absl::OkStatus();
}

}  // namespace plexus::bench
