#include "tools/bench_anchor.h"

#include <stdio.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/core/environment.h"

namespace plexus::bench {

absl::StatusOr<std::string> FindAnchorScript() {
  std::vector<std::string> candidates;
  if (const char* dir = ReadEnvironment("PLEXUS_ANCHORS")) {
    candidates.push_back(absl::StrCat(dir, "/run.sh"));
  }
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    candidates.push_back(absl::StrCat(workspace, "/../shared/anchors/run.sh"));
  }
  candidates.push_back("../shared/anchors/run.sh");
  for (const std::string& path : candidates) {
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return absl::NotFoundError(absl::StrCat("--anchor: the reference script is not here (looked for ",
                                          absl::StrJoin(candidates, ", "),
                                          "); set PLEXUS_ANCHORS to the directory holding run.sh"));
}

absl::StatusOr<std::vector<AnchorRow>> RunAnchor(const std::string& script, const std::string& kind,
                                                 int ranks, const std::vector<int64_t>& sizes) {
  if (kind != "mpi-shm" && kind != "mpi-tcp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--anchor=", kind, ": known anchors are mpi-shm and mpi-tcp"));
  }
  std::string command = absl::StrCat("bash '", script, "' ", kind, " ", ranks);
  for (int64_t bytes : sizes) absl::StrAppend(&command, " ", bytes);
  absl::StrAppend(&command, " 2>&1");
  fflush(stdout);
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return absl::InternalError(absl::StrCat("cannot run ", command));
  std::vector<AnchorRow> rows;
  std::string transcript;
  char line[1024];
  while (fgets(line, sizeof(line), out) != nullptr) {
    transcript += line;
    std::vector<absl::string_view> fields =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipWhitespace());
    AnchorRow row;
    if (fields.size() == 4 && absl::SimpleAtoi(fields[0], &row.bytes) &&
        absl::SimpleAtod(fields[1], &row.time_us) && absl::SimpleAtod(fields[2], &row.algbw) &&
        absl::SimpleAtod(fields[3], &row.busbw)) {
      rows.push_back(row);
    }
  }
  const int status = pclose(out);
  if (status != 0 || rows.size() != sizes.size()) {
    return absl::UnavailableError(
        absl::StrCat("--anchor=", kind, " at ", ranks, " ranks: ", rows.size(), " of ",
                     sizes.size(), " rows (exit ", status, "): ", transcript.substr(0, 600)));
  }
  return rows;
}

}  // namespace plexus::bench
