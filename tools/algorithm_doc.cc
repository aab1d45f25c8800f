// Prints docs/algorithm_names.md from the catalog of schedules (algorithms/algorithm_catalog.h):
// every name PLEXUS_ALGO accepts, per collective, with what it does and when it runs by default.
//
//   bazel run //tools:algorithm_doc > docs/algorithm_names.md
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_catalog.h"
#include "algorithms/algorithm_table.h"

namespace {

std::string Size(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return absl::StrCat(bytes >> 20, "M");
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return absl::StrCat(bytes >> 10, "K");
  return absl::StrCat(bytes);
}

// The default sizes as PLEXUS_ALGO writes a range ("0-128K", "8M-"), or what else applies.
std::string WhenByDefault(const plexus::algorithms::Algorithm& row, bool first) {
  if (row.default_from == 0 && row.default_to == plexus::algorithms::kNoSizeLimit)
    return "every size";
  if (row.default_from < row.default_to) {
    return absl::StrCat(
        "`", Size(row.default_from), "-",
        row.default_to == plexus::algorithms::kNoSizeLimit ? "" : Size(row.default_to), "`",
        first ? " (and any size an override leaves out)" : "");
  }
  return first ? "sizes an override leaves out" : "when told to";
}

}  // namespace

int main() {
  std::printf(
      "# Algorithm names\n\n"
      "Every schedule a collective can be told to run, by the name `PLEXUS_ALGO` gives it\n"
      "(`PLEXUS_ALGO=\"all_reduce:0-1M:rd,1M-:ring\"`, see [algorithms.md](algorithms.md)),\n"
      "and the message sizes it serves by default. The `..._same_host` sets apply when every\n"
      "rank of the group shares a host and its shared-memory arena is up, the `..._multi_host`\n"
      "set when the group spans hosts with several ranks on some.\n\n"
      "This page is generated from the catalog in `algorithms/algorithm_catalog.cc` (`bazel run\n"
      "//tools:algorithm_doc > docs/algorithm_names.md`), which also gives the algorithm table\n"
      "its defaults, `PLEXUS_ALGO` its names and the entry points their functions;\n"
      "`//tools:algorithm_doc_test` fails when the page is not the catalog's.\n\n"
      "| collective | name | by default | what it does |\n"
      "|---|---|---|---|\n");
  std::string last;
  for (const plexus::algorithms::Algorithm& row : plexus::algorithms::AlgorithmCatalog()) {
    const bool first = last != row.collective;
    last = row.collective;
    std::printf("| %s | `%s` | %s | %s |\n", row.collective, row.name,
                WhenByDefault(row, first).c_str(), row.description);
  }
  return 0;
}
