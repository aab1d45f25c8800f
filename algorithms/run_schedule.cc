// Choosing a collective's row: the same rule for every collective. A group on one host whose
// shared-memory arena is usable takes the collective's "_same_host" ranges, a group over
// several hosts with more than one rank on some host its "_multi_host" ranges, where the
// catalog has rows for them; otherwise the collective's own ranges. Within the ranges, the
// message size picks the row (the table's defaults, or PLEXUS_ALGO's).
#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"

namespace plexus::algorithms {
namespace {

// More than one host, and more than one rank on some host: a hierarchy saves something.
bool SpansHostsWithNeighbours(absl::Span<const int> host_of) {
  if (host_of.empty()) return false;
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  return hosts > 1 && hosts < static_cast<int>(host_of.size());
}

struct Variants {
  std::string same_host;  // Empty where the catalog has no such ranges.
  std::string multi_host;
};

// Each collective's variant ranges, read from the catalog once.
const Variants* VariantsOf(absl::string_view collective) {
  static const auto* variants = [] {
    auto* map = new absl::flat_hash_map<std::string, Variants>;
    const std::vector<std::string> names = KnownCollectives();
    auto known = [&](const std::string& name) {
      return std::find(names.begin(), names.end(), name) != names.end() ? name : std::string();
    };
    for (const std::string& name : names) {
      (*map)[name] = {known(absl::StrCat(name, "_same_host")),
                      known(absl::StrCat(name, "_multi_host"))};
    }
    return map;
  }();
  auto it = variants->find(collective);
  return it == variants->end() ? nullptr : &it->second;
}

}  // namespace

SelectedSchedule SelectSchedule(CollectiveContext& ctx, const AlgorithmTable& table,
                                absl::string_view collective, uint64_t bytes) {
  absl::string_view ranges = collective;
  SharedArena* arena = nullptr;
  if (const Variants* variants = VariantsOf(collective)) {
    if (!variants->same_host.empty()) arena = ArenaSlots::UsableArena(ctx);
    if (arena != nullptr) {
      ranges = variants->same_host;
    } else if (!variants->multi_host.empty() && SpansHostsWithNeighbours(ctx.host_of())) {
      ranges = variants->multi_host;
    }
  }
  return {table.Select(ranges, bytes), arena};
}

absl::Status RunSchedule(absl::string_view collective, uint64_t bytes, ScheduleCall call) {
  const SelectedSchedule selected = SelectSchedule(call.ctx, call.table, collective, bytes);
  call.arena = selected.arena;
  return selected.row.run(call);
}

}  // namespace plexus::algorithms
