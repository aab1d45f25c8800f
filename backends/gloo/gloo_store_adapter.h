// GlooStoreAdapter: Gloo's rendezvous store interface over a plexus Store, so a Gloo context
// meets its peers through whatever store the process group was initialised with.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/store/store.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/device.h"

namespace plexus::gloo_backend {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  // `timeout` bounds waits that Gloo starts without one of its own.
  GlooStoreAdapter(std::shared_ptr<plexus::Store> store, absl::Duration timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  // Failures throw gloo::IoException (Gloo's own stores report errors that way).
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  const std::shared_ptr<plexus::Store> store_;
  const absl::Duration timeout_;
};

// context.connectFullMesh over `store`. Gloo's rendezvous took the store by reference until
// 2025 (Debian 12, 13) and takes it by shared_ptr since (forky): this is the one place that
// knows, by what the installed header declares.
void ConnectFullMesh(gloo::rendezvous::Context& context, std::shared_ptr<GlooStoreAdapter> store,
                     std::shared_ptr<gloo::transport::Device>& device);

}  // namespace plexus::gloo_backend

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_
