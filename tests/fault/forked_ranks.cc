#include "tests/fault/forked_ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/dispatch/init.h"

namespace plexus::testing {
namespace {

void Report(int fd, const absl::Status& status) {
  const std::string line = absl::StrCat(static_cast<int>(status.code()), " ", status.message());
  [[maybe_unused]] ssize_t n = write(fd, line.data(), line.size());
  close(fd);
}

}  // namespace

ForkedRanks ForkRanks(int world_size, const std::function<absl::Status(int)>& body) {
  ForkedRanks ranks;
  fflush(stdout);
  fflush(stderr);
  for (int rank = 0; rank < world_size; ++rank) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(pipe_fds[0]);
      for (int fd : ranks.fds) close(fd);  // Earlier siblings' pipes belong to the parent.
      Report(pipe_fds[1], body(rank));
      _exit(0);
    }
    close(pipe_fds[1]);
    ranks.pids.push_back(pid);
    ranks.fds.push_back(pipe_fds[0]);
  }
  return ranks;
}

std::vector<Outcome> CollectOutcomes(const std::vector<int>& fds) {
  std::vector<Outcome> outcomes(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fds[i], buffer, sizeof(buffer))) > 0) text.append(buffer, n);
    close(fds[i]);
    const size_t space = text.find(' ');
    if (space == std::string::npos) continue;
    outcomes[i].code = static_cast<absl::StatusCode>(std::stoi(text.substr(0, space)));
    outcomes[i].message = text.substr(space + 1);
  }
  return outcomes;
}

void ReapRanks(const ForkedRanks& ranks) {
  for (pid_t pid : ranks.pids) waitpid(pid, nullptr, 0);
}

ForkedRanks ForkRanksLoopingAllReduce(int world_size, const std::string& url,
                                      const std::string& backend, int64_t floats,
                                      absl::Duration timeout, int* ready_count,
                                      const AfterFailure& then) {
  int ready[2];
  if (pipe(ready) != 0) abort();
  ForkedRanks ranks = ForkRanks(world_size, [&](int rank) -> absl::Status {
    close(ready[0]);
    auto group = JoinGroup(url, rank, world_size, timeout, backend);
    if (!group.ok()) return group.status();
    std::vector<float> data(static_cast<size_t>(floats), 1.0f);
    for (int i = 0;; ++i) {
      if (i == 1) {
        const char one = 1;
        [[maybe_unused]] ssize_t n = write(ready[1], &one, 1);
        close(ready[1]);
      }
      auto work = (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()));
      absl::Status status = work.ok() ? (*work)->Wait(timeout + absl::Seconds(5)) : work.status();
      if (!status.ok()) return then ? then(rank, **group, status) : status;
    }
  });
  close(ready[1]);
  char byte;
  *ready_count = 0;
  while (*ready_count < world_size && read(ready[0], &byte, 1) == 1) ++*ready_count;
  close(ready[0]);
  return ranks;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> JoinGroup(const std::string& url, int rank,
                                                        int world_size, absl::Duration timeout,
                                                        const std::string& backend) {
  InitOptions options;
  options.backend = backend;
  options.init_method = url;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = timeout;
  return InitProcessGroup(options);
}

std::string BackendTestName(const std::string& backend) {
  std::string name = backend.substr(backend.find(':') + 1);
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

int RunsFromEnvironment(const char* variable, int default_runs) {
  const char* value = std::getenv(variable);
  const int runs = value != nullptr ? std::atoi(value) : default_runs;
  return runs > 0 ? runs : default_runs;
}

}  // namespace plexus::testing
