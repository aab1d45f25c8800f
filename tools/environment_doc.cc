// Prints docs/environment.md from the table of environment variables
// (base/core/environment.h), or with --names only their names, one a line.
//
//   bazel run //tools:environment_doc > docs/environment.md
#include <cstdio>
#include <cstring>
#include <string>

#include "base/core/environment.h"

namespace {

// A table cell: pipes would end it early.
std::string Cell(const char* text) {
  std::string out;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c == '|') out += '\\';
    out += *c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool names_only = argc > 1 && std::strcmp(argv[1], "--names") == 0;
  if (names_only) {
    for (const plexus::EnvironmentVariable& variable : plexus::EnvironmentVariables()) {
      std::printf("%s\n", variable.name);
    }
    return 0;
  }
  std::printf(
      "# Environment variables\n\n"
      "Every `PLEXUS_*` variable plexus reads. Explicit arguments (`init_process_group(...,\n"
      "secret=...)`, `TcpTransportOptions`, `CommunicatorOptions`, ...) win over the\n"
      "environment where both exist.\n\n"
      "This page is generated from the table in `base/core/environment.cc` (`bazel run\n"
      "//tools:environment_doc > docs/environment.md`); `//tools:environment_doc_test` fails\n"
      "when the page, the table or the names the sources read disagree. Integers, seconds,\n"
      "byte counts and 0-or-1 flags are parsed by the table's type, with the table's default\n"
      "when unset or empty (`EnvironmentSeconds` and its siblings in\n"
      "`base/core/environment.h`): a value that does not parse is an error naming the\n"
      "variable and the value, e.g. `PLEXUS_ELASTIC_TIMEOUT='-3' is not a positive number of\n"
      "seconds`.\n\n"
      "| variable | type | default | meaning | more |\n"
      "|---|---|---|---|---|\n");
  for (const plexus::EnvironmentVariable& variable : plexus::EnvironmentVariables()) {
    std::string details = variable.details;
    std::string links;
    size_t start = 0;
    while (start <= details.size()) {
      size_t end = details.find(", ", start);
      if (end == std::string::npos) end = details.size();
      const std::string page = details.substr(start, end - start);
      const std::string title = page.substr(0, page.find(".md"));
      if (!links.empty()) links += ", ";
      links += "[" + title + "](" + page + ")";
      start = end + 2;
    }
    std::printf("| `%s` | %s | %s | %s | %s |\n", variable.name, Cell(variable.type).c_str(),
                Cell(variable.default_value).c_str(), Cell(variable.meaning).c_str(),
                links.c_str());
  }
  return 0;
}
