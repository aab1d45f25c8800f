#include "backends/gloo/gloo_backend.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/gloo/gloo_store_adapter.h"
#include "backends/gloo/gloo_transport.h"
#include "frontend/core/status_macros.h"
#include "frontend/dispatch/backend_registry.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"

namespace plexus {

std::string GlooDeviceHostname() {
  for (const char* name : {"PLEXUS_GLOO_ADDR", "PLEXUS_TCP_ADDR"}) {
    if (const char* env = std::getenv(name); env != nullptr && *env != '\0') return env;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "127.0.0.1";
}

void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

absl::StatusOr<std::shared_ptr<Backend>> GlooBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  // Gloo writes to its sockets without MSG_NOSIGNAL: a write to a dead peer would kill this
  // process with SIGPIPE instead of failing the operation.
  IgnoreSigpipeUnlessHandled();
  std::shared_ptr<gloo::rendezvous::Context> gloo_context;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = GlooDeviceHostname();
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    gloo_context = std::make_shared<gloo::rendezvous::Context>(context.rank, context.size);
    gloo_context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(context.timeout)));
    GlooStoreAdapter store(context.store, context.timeout);
    gloo_context->connectFullMesh(store, device);
  } catch (const std::exception& error) {
    return GlooErrorToStatus(error, absl::StrCat("gloo: connecting rank ", context.rank, " of ",
                                                 context.size, " (group ", context.group_name,
                                                 ")"));
  }
  auto transport = std::make_shared<GlooTransport>(std::move(gloo_context));
  auto collectives = std::make_unique<Collectives>(std::move(transport), std::move(table));
  return std::shared_ptr<Backend>(new GlooBackend(std::move(collectives)));
}

BackendCapabilities GlooBackend::capabilities() const { return CpuTransportCapabilities(); }

namespace {

const BackendRegisterer kRegisterGloo({kGlooBackendName, {DeviceType::kCpu}, &GlooBackend::Create});

}  // namespace
}  // namespace plexus
