// The elastic master as a program (plexus.elastic's MasterNode):
//
//   bazel run //tools:elastic_master -- --listen-address=0.0.0.0:48148 --heartbeat-timeout=5
// Prints the address it listens on; runs until SIGINT or SIGTERM. Without --heartbeat-timeout,
// PLEXUS_HEARTBEAT (default 5 s) sets how long a silent peer is kept.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "base/core/heartbeat.h"
#include "frontend/elastic/master_node.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  plexus::elastic::MasterNodeOptions options;
  absl::StatusOr<absl::Duration> heartbeat = plexus::HeartbeatFromEnvironment();
  if (!heartbeat.ok() || *heartbeat == absl::InfiniteDuration()) {
    fprintf(stderr, "elastic_master: %s\n",
            heartbeat.ok() ? "PLEXUS_HEARTBEAT cannot be off for the master"
                           : std::string(heartbeat.status().message()).c_str());
    return 2;
  }
  options.heartbeat_timeout = *heartbeat;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    double seconds = 0;
    if (name == "--listen-address") {
      options.listen_address = value;
    } else if (name == "--heartbeat-timeout") {
      ok = ok && absl::SimpleAtod(value, &seconds) && seconds > 0;
      options.heartbeat_timeout = absl::Seconds(seconds);
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr,
              "usage: elastic_master [--listen-address=HOST:PORT] "
              "[--heartbeat-timeout=SECONDS]\n");
      return 2;
    }
  }
  auto master = plexus::elastic::MasterNode::Create(options);
  if (!master.ok() || !(*master)->Run().ok()) {
    fprintf(stderr, "%s\n", master.ok() ? "cannot start" : master.status().ToString().c_str());
    return 1;
  }
  printf("plexus elastic master listening on %s:%d\n", (*master)->host().c_str(),
         (*master)->port());
  fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) usleep(100 * 1000);
  (*master)->Interrupt();
  return (*master)->AwaitTermination(absl::Seconds(10)).ok() ? 0 : 1;
}
