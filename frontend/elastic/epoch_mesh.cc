#include "frontend/elastic/epoch_mesh.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/store/prefix_store.h"
#include "frontend/elastic/elastic_types.h"

namespace plexus::elastic {

EpochMesh::EpochMesh(Mutex& owner_mu, std::string transport, int64_t group, TransportSetup base,
                     Check check)
    : owner_mu_(owner_mu),
      transport_(std::move(transport)),
      group_(group),
      base_(std::move(base)),
      check_(std::move(check)) {}

absl::StatusOr<std::shared_ptr<Transport>> EpochMesh::Get(int64_t epoch) {
  MutexLock build(build_mu_);
  absl::StatusOr<Members> members;
  std::shared_ptr<Transport> old;
  {
    MutexLock lock(owner_mu_);
    if (epoch_ == epoch) return mesh_;
    members = check_(epoch);
    if (!members.ok()) return members.status();
    old = std::move(mesh_);
    epoch_ = -1;
  }
  old.reset();  // Closes the previous epoch's connections.
  const auto position = std::find(members->ring.begin(), members->ring.end(), members->me);
  if (position == members->ring.end()) {
    return absl::UnavailableError("this peer is not in the group's ring any more");
  }
  std::shared_ptr<Transport> mesh;
  if (members->ring.size() > 1) {
    TransportSetup setup = base_;
    const std::string name = absl::StrCat("elastic/g", group_, "/e", epoch);
    setup.store = std::make_shared<PrefixStore>(name, members->store);
    setup.rank = static_cast<int>(position - members->ring.begin());
    setup.size = static_cast<int>(members->ring.size());
    setup.group_name = name;
    setup.address = members->address;
    setup.cancelled = [this, epoch] {
      MutexLock lock(owner_mu_);
      return !check_(epoch).ok();
    };
    auto made = CreateTransport(transport_, setup);
    if (!made.ok()) {
      if (made.status().code() == absl::StatusCode::kAborted) {
        return absl::UnavailableError(absl::StrCat("the peers changed while connecting epoch ",
                                                   epoch, ": ", made.status().message()));
      }
      return WithResult(made.status(), Result::kRankConnectionFailed);
    }
    mesh = std::shared_ptr<Transport>(std::move(made).value());
  }
  MutexLock lock(owner_mu_);
  if (!check_(epoch).ok()) {
    if (mesh) mesh->Abort(absl::UnavailableError("epoch over"));
    return absl::UnavailableError(absl::StrCat("epoch ", epoch, " ended while connecting"));
  }
  mesh_ = mesh;
  epoch_ = epoch;
  return mesh;
}

std::shared_ptr<Transport> EpochMesh::StaleAt(int64_t epoch) const {
  return mesh_ && epoch_ != epoch ? mesh_ : nullptr;
}

std::shared_ptr<Transport> EpochMesh::Release() {
  epoch_ = -1;
  return std::move(mesh_);
}

int EpochMesh::SharedMemoryPeers() const {
  if (!mesh_) return 0;
  const absl::Span<const int> host_of = mesh_->host_of();
  const int me = mesh_->rank();
  if (host_of.size() != static_cast<size_t>(mesh_->size())) return 0;
  int same = 0;
  for (int peer = 0; peer < mesh_->size(); ++peer)
    same += peer != me && host_of[peer] == host_of[me];
  return same;
}

}  // namespace plexus::elastic
