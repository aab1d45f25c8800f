#include "base/rendezvous/launcher_env.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

constexpr size_t kMaxExpandedHosts = 1 << 20;

// Splits at commas that are not inside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view list) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string current;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

absl::Status ExpandName(absl::string_view name, absl::string_view list,
                        std::vector<std::string>& out) {
  const size_t open = name.find('[');
  if (open == absl::string_view::npos) {
    if (name.find(']') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", list, "': stray ']'"));
    }
    out.emplace_back(name);
    return absl::OkStatus();
  }
  const size_t close = name.find(']', open);
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", list, "': unclosed '['"));
  }
  const absl::string_view prefix = name.substr(0, open);
  const absl::string_view ranges = name.substr(open + 1, close - open - 1);
  const absl::string_view rest = name.substr(close + 1);
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(range, absl::MaxSplits('-', 1));
    int64_t low = 0;
    int64_t high = 0;
    if (ends[0].empty() || !absl::SimpleAtoi(ends[0], &low) ||
        !absl::SimpleAtoi(ends.size() > 1 ? ends[1] : ends[0], &high) || high < low ||
        high - low > static_cast<int64_t>(kMaxExpandedHosts)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Slurm node list '", list, "': bad range '", range, "'"));
    }
    const size_t width = ends[0].size();
    for (int64_t i = low; i <= high; ++i) {
      std::string number = absl::StrCat(i);
      if (number.size() < width) number.insert(0, width - number.size(), '0');
      RETURN_IF_ERROR(ExpandName(absl::StrCat(prefix, number, rest), list, out));
      if (out.size() > kMaxExpandedHosts) {
        return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", list, "' is too long"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(absl::string_view list) {
  std::vector<std::string> hosts;
  for (const std::string& part : SplitTopLevel(absl::StripAsciiWhitespace(list))) {
    if (part.empty()) continue;
    RETURN_IF_ERROR(ExpandName(part, list, hosts));
  }
  if (hosts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm node list '", list, "' names no host"));
  }
  return hosts;
}

int SlurmRendezvousPort(int64_t job_id, int64_t step_id) {
  const int64_t mixed = (job_id % 20000) * 16 + (step_id < 0 ? 0 : step_id % 16);
  return 15000 + static_cast<int>(mixed % 20000);
}

absl::StatusOr<StoreAddress> EnvStoreAddress(const EnvLookup& env) {
  std::optional<std::string> addr = env("MASTER_ADDR");
  std::optional<std::string> port = env("MASTER_PORT");
  StoreAddress result;
  std::optional<std::string> nodelist_var;
  std::optional<std::string> nodelist;
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if ((nodelist = env(name)).has_value()) {
      nodelist_var = name;
      break;
    }
  }
  const std::optional<std::string> job = env("SLURM_JOB_ID");
  const bool slurm = nodelist.has_value() && job.has_value();
  if ((!addr.has_value() || !port.has_value()) && !slurm) {
    return absl::InvalidArgumentError(
        "init_method env:// needs MASTER_ADDR and MASTER_PORT in the environment (none were "
        "set, and this process was not started by srun in a Slurm job or by mpirun, which plexus "
        "can rendezvous through on its own)");
  }
  if (addr.has_value()) {
    result.host = *addr;
    result.source = "MASTER_ADDR";
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandSlurmNodelist(*nodelist));
    result.host = hosts.front();
    result.source = absl::StrCat("the first node of ", *nodelist_var, "=", *nodelist);
  }
  if (port.has_value()) {
    if (!absl::SimpleAtoi(*port, &result.port) || result.port <= 0 || result.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("MASTER_PORT '", *port, "' is not a port number (1-65535)"));
    }
    absl::StrAppend(&result.source, ", MASTER_PORT");
  } else {
    int64_t job_id = 0;
    int64_t step_id = 0;
    if (!absl::SimpleAtoi(*job, &job_id)) {
      return absl::InvalidArgumentError(absl::StrCat("SLURM_JOB_ID '", *job, "' is not a number"));
    }
    if (auto step = env("SLURM_STEP_ID"); !step.has_value() || !absl::SimpleAtoi(*step, &step_id)) {
      step_id = 0;
    }
    result.port = SlurmRendezvousPort(job_id, step_id);
    absl::StrAppend(&result.source, ", port ", result.port, " from SLURM_JOB_ID=", job_id,
                    " and SLURM_STEP_ID=", step_id);
  }
  return result;
}

bool UnderMpirun(const EnvLookup& env) { return env("OMPI_COMM_WORLD_SIZE").has_value(); }

std::optional<std::string> TorchrunAgentStorePrefix(const EnvLookup& env) {
  std::optional<std::string> agent = env("TORCHELASTIC_USE_AGENT_STORE");
  if (!agent.has_value() || absl::AsciiStrToLower(*agent) != "true") return std::nullopt;
  std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  return absl::StrCat("plexus/attempt_", attempt);
}

}  // namespace plexus
