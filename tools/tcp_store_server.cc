// A standalone TCPStore server, for launches where no rank should host the store.
//
//   bazel run //tools:tcp_store_server -- --host=0.0.0.0 --port=29500 --world_size=16
// Runs until SIGINT or SIGTERM. Honours the job's security settings as every rank does:
// PLEXUS_SECRET / PLEXUS_SECRET_FILE (clients must prove the secret) and PLEXUS_TLS_CERT /
// PLEXUS_TLS_KEY / PLEXUS_TLS_CA (every connection is TLS 1.3), docs/security.md.
// --require=secret, --require=tls or --require=secret,tls refuse to start without them, so a
// deployment that lost its variables fails loudly instead of serving anyone.
#include "base/store/tcp_store_server.h"

#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/auth/mutual_auth.h"
#include "base/auth/tls.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  plexus::TCPStoreServerOptions options;
  bool require_secret = false;
  bool require_tls = false;
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
    } else if (name == "--require") {
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        if (part == "secret") {
          require_secret = true;
        } else if (part == "tls") {
          require_tls = true;
        } else {
          ok = false;
        }
      }
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr,
              "usage: tcp_store_server [--host=ADDR] [--port=N] [--world_size=N] "
              "[--require=secret|tls|secret,tls]\n");
      return 2;
    }
  }
  auto secret = plexus::auth::ResolveSecret(std::nullopt);
  auto tls = plexus::auth::TlsContext::Resolve(std::nullopt);
  for (const absl::Status& status : {secret.status(), tls.status()}) {
    if (!status.ok()) {
      fprintf(stderr, "tcp_store_server: %s\n", std::string(status.message()).c_str());
      return 2;
    }
  }
  if (require_secret && secret->empty()) {
    fprintf(stderr,
            "tcp_store_server: --require=secret, but neither PLEXUS_SECRET nor "
            "PLEXUS_SECRET_FILE is set: refusing to serve clients without a secret\n");
    return 2;
  }
  if (require_tls && *tls == nullptr) {
    fprintf(stderr,
            "tcp_store_server: --require=tls, but PLEXUS_TLS_CERT and PLEXUS_TLS_KEY are not "
            "set: refusing to serve clear-text connections\n");
    return 2;
  }
  options.secret = *secret;
  options.tls = *tls;
  auto server = plexus::TCPStoreServer::Start(options);
  if (!server.ok()) {
    fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  printf("TCPStore server listening on %s:%d (%s, %s)\n",
         options.host.empty() ? "*" : options.host.c_str(), (*server)->port(),
         options.secret.empty() ? "no shared secret" : "shared secret required",
         options.tls == nullptr ? "no TLS" : "TLS 1.3");
  fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  sigset_t none;
  sigemptyset(&none);
  while (!g_stop) sigsuspend(&none);
  printf("stopping (%d clients connected)\n", (*server)->connected_clients());
  return 0;
}
