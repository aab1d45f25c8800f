// An EnvLookup over a fixed map, so a test states a launcher's environment without touching the
// process's own.
#ifndef PLEXUS_TESTS_TESTING_FAKE_ENV_H_
#define PLEXUS_TESTS_TESTING_FAKE_ENV_H_

#include <map>
#include <optional>
#include <string>

#include "base/rendezvous/rendezvous.h"

namespace plexus::testing {

inline EnvLookup FakeEnv(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace plexus::testing

#endif  // PLEXUS_TESTS_TESTING_FAKE_ENV_H_
