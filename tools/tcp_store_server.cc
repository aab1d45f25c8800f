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

struct Flags {
  plexus::TCPStoreServerOptions options;
  bool require_secret = false;
  bool require_tls = false;
};

// --require's comma-separated list; false for a word it does not know.
bool ParseRequire(absl::string_view value, Flags& flags) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (part == "secret") {
      flags.require_secret = true;
    } else if (part == "tls") {
      flags.require_tls = true;
    } else {
      return false;
    }
  }
  return true;
}

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return false;
    const std::string name = arg.substr(0, eq);
    const std::string value = arg.substr(eq + 1);
    bool ok = true;
    if (name == "--host") {
      flags.options.host = value;
    } else if (name == "--port") {
      ok = absl::SimpleAtoi(value, &flags.options.port);
    } else if (name == "--world_size") {
      ok = absl::SimpleAtoi(value, &flags.options.expected_clients);
    } else if (name == "--require") {
      ok = ParseRequire(value, flags);
    } else {
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

// The job's secret and TLS settings into the server's options; false (having said why) when
// they are malformed or --require asks for one that is not set.
bool ResolveSecurity(Flags& flags) {
  auto secret = plexus::auth::ResolveSecret(std::nullopt);
  auto tls = plexus::auth::TlsContext::Resolve(std::nullopt);
  for (const absl::Status& status : {secret.status(), tls.status()}) {
    if (!status.ok()) {
      fprintf(stderr, "tcp_store_server: %s\n", std::string(status.message()).c_str());
      return false;
    }
  }
  if (flags.require_secret && secret->empty()) {
    fprintf(stderr,
            "tcp_store_server: --require=secret, but neither PLEXUS_SECRET nor "
            "PLEXUS_SECRET_FILE is set: refusing to serve clients without a secret\n");
    return false;
  }
  if (flags.require_tls && *tls == nullptr) {
    fprintf(stderr,
            "tcp_store_server: --require=tls, but PLEXUS_TLS_CERT and PLEXUS_TLS_KEY are not "
            "set: refusing to serve clear-text connections\n");
    return false;
  }
  flags.options.secret = *secret;
  flags.options.tls = *tls;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    fprintf(stderr,
            "usage: tcp_store_server [--host=ADDR] [--port=N] [--world_size=N] "
            "[--require=secret|tls|secret,tls]\n");
    return 2;
  }
  if (!ResolveSecurity(flags)) return 2;
  const plexus::TCPStoreServerOptions& options = flags.options;
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
