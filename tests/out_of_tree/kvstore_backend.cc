#include "tests/out_of_tree/kvstore_backend.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/common/collectives_backend.h"
#include "backends/interface/backend_registry.h"
#include "base/transport/transport.h"

namespace kvstore_example {
namespace {

using plexus::MessageTag;
using plexus::Work;
using plexus::WorkPtr;

// Messages as store keys. Sends complete at once (the Set is the delivery); a receive
// completes inside Wait(), which takes the key - the way a transport without its own
// progress thread works.
class StoreTransport : public plexus::Transport {
 public:
  StoreTransport(std::shared_ptr<plexus::Store> store, int rank, int size)
      : store_(std::move(store)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data, absl::Duration) override {
    const std::string key = NextKey(rank_, peer, tag.tag, send_counts_);
    absl::Status status = broken();
    if (status.ok()) {
      status = store_->Set(
          key, absl::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
    }
    auto work = std::make_shared<Work>("send", size_);
    if (status.ok()) work->AddBytesSent(static_cast<int64_t>(data.size()));
    work->Complete(status);
    return work;
  }

  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
               absl::Duration timeout) override {
    const std::string key = NextKey(peer, rank_, tag.tag, recv_counts_);
    auto work = std::make_shared<Work>("recv", size_);
    const absl::Time deadline = absl::Now() + timeout;
    auto receiving = std::make_shared<std::mutex>();
    std::weak_ptr<Work> weak = work;
    work->SetWaitHook([this, key, data, deadline, receiving, weak, peer](absl::Duration wait) {
      std::unique_lock<std::mutex> lock(*receiving, std::try_to_lock);
      WorkPtr self = weak.lock();
      if (!lock.owns_lock() || self == nullptr || self->IsCompleted()) return;
      if (absl::Status status = broken(); !status.ok()) {
        self->Complete(status);
        return;
      }
      const absl::Duration left = std::min(wait, deadline - absl::Now());
      absl::Status waited = store_->Wait({key}, std::max(left, absl::ZeroDuration()));
      if (!waited.ok()) {
        if (absl::Now() >= deadline) self->Complete(waited);  // Else: the caller's wait ended.
        return;
      }
      absl::StatusOr<std::string> value = store_->Get(key);
      if (!value.ok()) {
        self->Complete(value.status());
        return;
      }
      (void)store_->DeleteKey(key);
      if (value->size() != data.size()) {
        self->Complete(absl::FailedPreconditionError(
            absl::StrCat("kvstore recv of ", data.size(), " bytes from rank ", peer,
                         " matched a message of ", value->size(), " bytes")));
        return;
      }
      if (!data.empty()) std::memcpy(data.data(), value->data(), data.size());
      self->AddBytesReceived(static_cast<int64_t>(data.size()));
      self->Complete(absl::OkStatus());
    });
    return work;
  }

  WorkPtr RecvFromAny(MessageTag, absl::Span<uint8_t>, absl::Duration) override {
    return Work::Finished(absl::UnimplementedError("kvstore has no receive-from-any-source"),
                          "recv", size_);
  }

  void AbortOperation(uint64_t operation, absl::Status reason) override {
    Abort(
        absl::Status(reason.code(), absl::StrCat("operation ", operation, ": ", reason.message())));
  }

  void Abort(absl::Status reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = std::move(reason);
  }

 private:
  using Counts = std::map<std::tuple<int, int, uint64_t>, uint64_t>;

  // Messages of one (sender, receiver, tag) are numbered alike on both sides.
  std::string NextKey(int src, int dst, uint64_t tag, Counts& counts) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t n = counts[{src, dst, tag}]++;
    return absl::StrCat("kv/", src, "/", dst, "/", tag, "/", n);
  }

  absl::Status broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  const std::shared_ptr<plexus::Store> store_;
  const int rank_;
  const int size_;
  std::mutex mu_;
  Counts send_counts_;
  Counts recv_counts_;
  absl::Status broken_;
};

class KvStoreBackend : public plexus::CollectivesBackend {
 public:
  static absl::StatusOr<std::shared_ptr<plexus::Backend>> Create(
      const plexus::BackendContext& context) {
    auto table = plexus::algorithms::AlgorithmTable::FromEnvironment();
    if (!table.ok()) return table.status();
    auto transport = std::make_shared<StoreTransport>(context.store, context.rank, context.size);
    auto collectives =
        std::make_unique<plexus::executor::Collectives>(std::move(transport), *table);
    return std::shared_ptr<plexus::Backend>(new KvStoreBackend(std::move(collectives)));
  }

  std::string name() const override { return kBackendName; }
  plexus::BackendCapabilities capabilities() const override {
    plexus::BackendCapabilities capabilities = CpuTransportCapabilities();
    capabilities.recv_any_source = false;
    return capabilities;
  }

 private:
  using CollectivesBackend::CollectivesBackend;
};

}  // namespace

absl::Status RegisterKvStoreBackend() {
  return plexus::BackendRegistry::Global().Register(
      {kBackendName, {plexus::DeviceType::kCpu}, &KvStoreBackend::Create});
}

}  // namespace kvstore_example
