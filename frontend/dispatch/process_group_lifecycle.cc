// ProcessGroup after a failure: abort, shrink to the survivors, split by colour. Membership
// decisions go through the group's store, so every rank acts on the same record.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/event_journal.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/rendezvous.h"
#include "base/store/prefix_store.h"
#include "frontend/dispatch/process_group.h"

namespace plexus {
namespace {

// "1,3" <-> {1, 3}.
std::string RankList(const std::vector<int>& ranks) { return absl::StrJoin(ranks, ","); }

absl::StatusOr<std::vector<int>> ParseRankList(absl::string_view text) {
  std::vector<int> ranks;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int rank = 0;
    if (!absl::SimpleAtoi(item, &rank)) {
      return absl::DataLossError(absl::StrCat("bad rank list '", text, "' in the store"));
    }
    ranks.push_back(rank);
  }
  return ranks;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Child(
    const std::string& name, const std::string& store_prefix, const std::vector<int>& members,
    const char* barrier, std::string backend, bool new_world) {
  auto member = std::find(members.begin(), members.end(), config_.rank);
  if (member == members.end()) return std::shared_ptr<ProcessGroup>();
  Config config = config_;
  config.name = name;
  config.rank = static_cast<int>(member - members.begin());
  config.size = static_cast<int>(members.size());
  config.global_ranks.clear();
  for (int r = 0; r < config.size; ++r) {
    config.global_ranks.push_back(new_world ? r : config_.global_ranks[members[r]]);
  }
  config.store = std::make_shared<PrefixStore>(store_prefix, config_.store);
  if (!backend.empty()) config.backend = std::move(backend);
  RETURN_IF_ERROR(StoreBarrier(*config.store, barrier, config.rank, config.size, config.timeout));
  return Create(std::move(config), registry_);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Companion(absl::string_view purpose) {
  if (purpose.empty() || purpose.find_first_of("./ ") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("companion of group '", config_.name,
                                                   "': purpose '", purpose,
                                                   "' must be one word (no '.', '/' or space)"));
  }
  auto cpu = std::find_if(mapping_.begin(), mapping_.end(), [](const DeviceBackend& entry) {
    return entry.device == DeviceType::kCpu;
  });
  if (cpu == mapping_.end()) return FindServed(DeviceType::kCpu).status();
  std::vector<int> everyone(config_.size);
  for (int rank = 0; rank < config_.size; ++rank) everyone[rank] = rank;
  return Child(absl::StrCat(config_.name, ".", purpose), absl::StrCat("companion.", purpose),
               everyone, "companion", absl::StrCat("cpu:", cpu->backend));
}

absl::Status ProcessGroup::aborted() const {
  MutexLock lock(abort_mu_);
  return aborted_;
}

absl::Status ProcessGroup::Abort(absl::string_view reason) {
  absl::Status status;
  {
    MutexLock lock(abort_mu_);
    if (!aborted_.ok()) return absl::OkStatus();
    aborted_ = absl::AbortedError(absl::StrCat("process group '", config_.name, "' (rank ",
                                               config_.rank, ") was aborted: ", reason));
    status = aborted_;
    is_aborted_.store(true, std::memory_order_release);
  }
  NoteEvent("abort", status.message());
  std::vector<std::string> unable;
  for (const Served& served : backends_) {
    if (!served.backend->Abort(status).ok()) unable.push_back(served.backend->name());
  }
  if (!unable.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("process group '", config_.name, "' refuses new operations, but backend(s) ",
                     absl::StrJoin(unable, ", "), " could not abort what they already run"));
  }
  return absl::OkStatus();
}

std::vector<int> ProcessGroup::LostRanks() const {
  std::vector<int> lost;
  for (const Served& served : backends_) {
    for (int rank : served.backend->LostRanks()) lost.push_back(rank);
  }
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  return lost;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Split(int color, int key) {
  const int64_t id = next_subgroup_id_.fetch_add(1);
  const std::string prefix = absl::StrCat("split.", id, "/");
  RETURN_IF_ERROR(
      config_.store->Set(absl::StrCat(prefix, config_.rank), absl::StrCat(color, " ", key)));
  std::vector<std::string> keys;
  for (int r = 0; r < config_.size; ++r) keys.push_back(absl::StrCat(prefix, r));
  absl::Status waited = config_.store->Wait(keys, config_.timeout);
  if (absl::IsDeadlineExceeded(waited)) {
    std::vector<int> missing;
    for (int r = 0; r < config_.size; ++r) {
      auto present = config_.store->Check({keys[r]});
      if (present.ok() && !*present) missing.push_back(r);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("split of group '", config_.name, "': rank(s) ", RankList(missing),
                     " did not call split_group within ", absl::FormatDuration(config_.timeout)));
  }
  RETURN_IF_ERROR(waited);
  ASSIGN_OR_RETURN(std::vector<std::string> values, config_.store->MultiGet(keys));
  // (key, rank) of every rank with this rank's colour.
  std::vector<std::pair<int, int>> same;
  for (int r = 0; r < config_.size; ++r) {
    std::pair<std::string, std::string> fields = absl::StrSplit(values[r], ' ');
    int their_color = 0, their_key = 0;
    if (!absl::SimpleAtoi(fields.first, &their_color) ||
        !absl::SimpleAtoi(fields.second, &their_key)) {
      return absl::DataLossError(absl::StrCat("split of group '", config_.name, "': rank ", r,
                                              " left '", values[r], "' in the store"));
    }
    if (color >= 0 && their_color == color) same.emplace_back(their_key, r);
  }
  if (color < 0) return std::shared_ptr<ProcessGroup>();
  std::sort(same.begin(), same.end());
  std::vector<int> members;
  for (const auto& [their_key, rank] : same) members.push_back(rank);
  return Child(absl::StrCat(config_.name, ".", id, ".c", color),
               absl::StrCat("split.", id, ".c", color), members, "split");
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Shrink(std::vector<int> excluded) {
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  for (int rank : excluded) {
    if (rank < 0 || rank >= config_.size) {
      return absl::InvalidArgumentError(absl::StrCat("shrink of group '", config_.name, "': rank ",
                                                     rank, " is outside [0, ", config_.size, ")"));
    }
  }
  if (static_cast<int>(excluded.size()) == config_.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shrink of group '", config_.name, "': every rank would be excluded"));
  }
  RETURN_IF_ERROR(CheckCanShrink());
  const int64_t generation = next_shrink_.fetch_add(1);
  // The first proposal stored wins; a slower survivor adopts it instead of its own view. The
  // "=" keeps an empty exclusion list distinguishable from no decision.
  ASSIGN_OR_RETURN(std::string decided,
                   config_.store->CompareSet(ShrinkKey(generation), "", "=" + RankList(excluded)));
  return AdoptShrink(generation, decided);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::ShrinkLost() {
  RETURN_IF_ERROR(CheckCanShrink());
  const int64_t generation = next_shrink_.fetch_add(1);
  const std::vector<int> lost = LostRanks();
  std::string decided;
  if (!lost.empty()) {
    ASSIGN_OR_RETURN(decided,
                     config_.store->CompareSet(ShrinkKey(generation), "", "=" + RankList(lost)));
  } else {
    // This rank saw nobody go: a survivor that did decides.
    absl::Status waited = config_.store->Wait({ShrinkKey(generation)}, config_.timeout);
    if (absl::IsDeadlineExceeded(waited)) {
      return absl::DeadlineExceededError(
          absl::StrCat("shrink of group '", config_.name, "': no rank found a lost peer within ",
                       absl::FormatDuration(config_.timeout), " (shrink_group(ranks) names them)"));
    }
    RETURN_IF_ERROR(waited);
    ASSIGN_OR_RETURN(decided, config_.store->Get(ShrinkKey(generation)));
  }
  return AdoptShrink(generation, decided);
}

absl::Status ProcessGroup::CheckCanShrink() const {
  for (const Served& served : backends_) {
    if (served.backend->name() == "mpi") {
      return absl::UnimplementedError(absl::StrCat(
          "shrink of group '", config_.name,
          "': the mpi backend cannot shrink (Open MPI ends "
          "the job when a rank dies; without ULFM there is no communicator to shrink)"));
    }
  }
  return absl::OkStatus();
}

std::string ProcessGroup::ShrinkKey(int64_t generation) {
  return absl::StrCat("shrink.", generation, "/excluded");
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::AdoptShrink(int64_t generation,
                                                                        absl::string_view decided) {
  if (decided.empty() || decided[0] != '=') {
    return absl::DataLossError(absl::StrCat("shrink of group '", config_.name, "': bad record '",
                                            decided, "' in the store"));
  }
  ASSIGN_OR_RETURN(std::vector<int> excluded, ParseRankList(decided.substr(1)));
  if (std::find(excluded.begin(), excluded.end(), config_.rank) != excluded.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shrink of group '", config_.name, "': the survivors excluded this rank (", config_.rank,
        "; excluded: ", RankList(excluded), "), found lost or too slow; it is in no new group"));
  }
  (void)Abort(absl::StrCat("shrunk to exclude rank(s) ", RankList(excluded)));
  std::vector<int> members;
  for (int r = 0; r < config_.size; ++r) {
    if (std::find(excluded.begin(), excluded.end(), r) == excluded.end()) members.push_back(r);
  }
  Log(LogLevel::kInfo, absl::StrCat("group '", config_.name, "' shrinks to ", members.size(),
                                    " ranks, without rank(s) ", RankList(excluded)));
  bool world = true;
  for (int r = 0; r < config_.size; ++r) world &= config_.global_ranks[r] == r;
  return Child(absl::StrCat(config_.name, ".shrink", generation),
               absl::StrCat("shrink.", generation), members, "shrink", "", world);
}

}  // namespace plexus
