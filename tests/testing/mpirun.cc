#include "tests/testing/mpirun.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/net/interfaces.h"
#include "base/rendezvous/rendezvous.h"
#include "tests/testing/subprocess.h"

namespace plexus::testing {

int MpirunWorldSize() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  int value = 0;
  if (size == nullptr || !absl::SimpleAtoi(size, &value)) return 0;
  return value;
}

absl::Status RunUnderMpirun(int ranks, const std::string& program,
                            const std::vector<std::string>& args, absl::Duration timeout) {
  std::vector<std::string> argv = {"mpirun", "-np", absl::StrCat(ranks), "--oversubscribe"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  for (std::string& arg : net::MpirunInterfaceArgs(GetEnv)) argv.push_back(std::move(arg));
  argv.push_back(program);
  argv.insert(argv.end(), args.begin(), args.end());
  absl::Status status = RunInChildren(
      1,
      [&](int) {
        // Every rank would write (and race on) the test runner's per-test files.
        for (const char* name : {"TEST_PREMATURE_EXIT_FILE", "XML_OUTPUT_FILE", "GTEST_OUTPUT"}) {
          unsetenv(name);
        }
        std::vector<char*> pointers;
        for (std::string& arg : argv) pointers.push_back(arg.data());
        pointers.push_back(nullptr);
        execvp("mpirun", pointers.data());
        perror("execvp mpirun");
        return 127;
      },
      timeout);
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("mpirun -np ", ranks, " ", program, ": ", status.message()));
}

}  // namespace plexus::testing
