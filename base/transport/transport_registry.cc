#include "base/transport/transport_registry.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/logging.h"
#include "base/core/mutex.h"

namespace plexus {
namespace {

struct Registry {
  Mutex mu;
  std::map<std::string, TransportFactory> factories ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry;  // Never destroyed: used from static initialisers.
  return *registry;
}

}  // namespace

absl::Status RegisterTransport(const std::string& name, TransportFactory factory) {
  Registry& registry = GlobalRegistry();
  MutexLock lock(registry.mu);
  if (!registry.factories.emplace(name, std::move(factory)).second) {
    return absl::AlreadyExistsError(absl::StrCat("transport '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(const std::string& name,
                                                           const TransportSetup& setup) {
  TransportFactory factory;
  {
    Registry& registry = GlobalRegistry();
    MutexLock lock(registry.mu);
    auto it = registry.factories.find(name);
    if (it == registry.factories.end()) {
      std::vector<std::string> names;
      for (const auto& entry : registry.factories) names.push_back(entry.first);
      return absl::NotFoundError(absl::StrCat(
          "no transport named '", name, "' is linked in (registered: ",
          names.empty() ? "none; link //backends/all" : absl::StrJoin(names, ", "), ")"));
    }
    factory = it->second;
  }
  return factory(setup);
}

TransportRegisterer::TransportRegisterer(const std::string& name, TransportFactory factory) {
  if (absl::Status status = RegisterTransport(name, std::move(factory)); !status.ok()) {
    Log(LogLevel::kWarning, std::string(status.message()));
  }
}

}  // namespace plexus
