#include "tests/testing/subprocess.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace plexus::testing {

absl::Status RunInChildren(int count, const std::function<int(int)>& body, absl::Duration timeout) {
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = body(i);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    if (pid < 0) {
      for (pid_t started : pids) kill(started, SIGKILL);
      return absl::InternalError("fork failed");
    }
    pids.push_back(pid);
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> statuses(count, -1);
  int remaining = count;
  std::string failures;
  while (remaining > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int i = 0; i < count; ++i) {
        if (pids[i] == pid) {
          statuses[i] = status;
          --remaining;
        }
      }
      continue;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(2));  // Polling for exit; not synchronisation.
  }
  for (int i = 0; i < count; ++i) {
    if (statuses[i] == -1) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
      absl::StrAppend(&failures, " child ", i, " still running after ",
                      absl::FormatDuration(timeout), " (killed);");
    } else if (WIFSIGNALED(statuses[i])) {
      absl::StrAppend(&failures, " child ", i, " killed by signal ", WTERMSIG(statuses[i]), ";");
    } else if (WEXITSTATUS(statuses[i]) != 0) {
      absl::StrAppend(&failures, " child ", i, " exited with ", WEXITSTATUS(statuses[i]), ";");
    }
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("subprocess failures:", failures));
}

absl::StatusOr<std::unique_ptr<ChildServer>> ChildServer::Start(
    const std::function<void(const std::function<void(int)>& report)>& serve,
    absl::Duration timeout) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    close(fds[0]);
    serve([&](int port) {
      [[maybe_unused]] ssize_t n = write(fds[1], &port, sizeof(port));
      close(fds[1]);
      while (true) pause();  // Serve until killed.
    });
    _exit(1);
  }
  close(fds[1]);
  pollfd pfd{fds[0], POLLIN, 0};
  int port = 0;
  const int ready = poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  const bool got = ready == 1 && read(fds[0], &port, sizeof(port)) == sizeof(port);
  close(fds[0]);
  if (!got) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::InternalError("child server did not report a port");
  }
  return std::unique_ptr<ChildServer>(new ChildServer(pid, port));
}

ChildServer::~ChildServer() {
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".", getpid(), ".",
                      counter.fetch_add(1));
}

absl::Duration CpuTime(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t command_end = text.rfind(')');
  if (command_end == std::string::npos || command_end + 2 > text.size()) {
    return absl::ZeroDuration();
  }
  // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
  std::vector<std::string> fields = absl::StrSplit(text.substr(command_end + 2), ' ');
  int64_t user = 0, system = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &user) ||
      !absl::SimpleAtoi(fields[12], &system)) {
    return absl::ZeroDuration();
  }
  return absl::Seconds(static_cast<double>(user + system) / sysconf(_SC_CLK_TCK));
}

int64_t VoluntarySwitches(int pid) {
  DIR* tasks = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
  if (tasks == nullptr) return -1;
  int64_t total = 0;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream status(absl::StrCat("/proc/", pid, "/task/", entry->d_name, "/status"));
    for (std::string text; std::getline(status, text);) {
      absl::string_view line = text;
      int64_t count = 0;
      if (absl::ConsumePrefix(&line, "voluntary_ctxt_switches:") &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &count)) {
        total += count;
      }
    }
  }
  closedir(tasks);
  return total;
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace plexus::testing
