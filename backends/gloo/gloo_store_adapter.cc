#include "backends/gloo/gloo_store_adapter.h"

#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace plexus::gloo_backend {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw gloo::IoException(absl::StrCat("plexus store: ", status.ToString()));
}

// Whether Context::connectFullMesh takes the store as a shared_ptr (gloo from 2025 on).
template <typename Context, typename = void>
struct TakesSharedStore : std::false_type {};
template <typename Context>
using SharedStoreConnect = decltype(std::declval<Context&>().connectFullMesh(
    std::declval<std::shared_ptr<gloo::rendezvous::Store>>(),
    std::declval<std::shared_ptr<gloo::transport::Device>&>()));
template <typename Context>
struct TakesSharedStore<Context, std::void_t<SharedStoreConnect<Context>>> : std::true_type {};

template <typename Context = gloo::rendezvous::Context>
void ConnectFullMeshOver(Context& context, std::shared_ptr<GlooStoreAdapter> store,
                         std::shared_ptr<gloo::transport::Device>& device) {
  if constexpr (TakesSharedStore<Context>::value) {
    context.connectFullMesh(std::shared_ptr<gloo::rendezvous::Store>(std::move(store)), device);
  } else {
    context.connectFullMesh(*store, device);
  }
}

}  // namespace

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(key, absl::string_view(data.data(), data.size()));
  if (!status.ok()) Throw(status);
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  // Gloo expects get() to block until the key exists; plexus stores' Get() does.
  absl::StatusOr<std::string> value = store_->Get(key);
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  if (absl::Status status = store_->Wait(keys, timeout_); !status.ok()) Throw(status);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  absl::Status status = store_->Wait(keys, absl::FromChrono(timeout));
  if (!status.ok()) Throw(status);
}

void ConnectFullMesh(gloo::rendezvous::Context& context, std::shared_ptr<GlooStoreAdapter> store,
                     std::shared_ptr<gloo::transport::Device>& device) {
  ConnectFullMeshOver(context, std::move(store), device);
}

}  // namespace plexus::gloo_backend
