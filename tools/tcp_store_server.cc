// A standalone TCPStore server, for launches where no rank should host the store.
//
//   bazel run //tools:tcp_store_server -- --host=0.0.0.0 --port=29500 --world_size=16
// Runs until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "frontend/store/tcp_store_server.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  plexus::TCPStoreServerOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (name == "--host") {
      options.host = value;
    } else if (name == "--port") {
      ok = ok && absl::SimpleAtoi(value, &options.port);
    } else if (name == "--world_size") {
      ok = ok && absl::SimpleAtoi(value, &options.expected_clients);
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr, "usage: tcp_store_server [--host=ADDR] [--port=N] [--world_size=N]\n");
      return 2;
    }
  }
  auto server = plexus::TCPStoreServer::Start(options);
  if (!server.ok()) {
    fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  printf("TCPStore server listening on %s:%d\n", options.host.empty() ? "*" : options.host.c_str(),
         (*server)->port());
  fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  sigset_t none;
  sigemptyset(&none);
  while (!g_stop) sigsuspend(&none);
  printf("stopping (%d clients connected)\n", (*server)->connected_clients());
  return 0;
}
