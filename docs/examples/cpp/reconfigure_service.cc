// Membership by handle, torch 2.14's reconfigure contract without torch: MEMBERS processes share
// a FileStore, each publishes its handle, and together they form a group under uuid 1 and sum.
// Then the last member leaves and the others form a group of their own under uuid 2 and sum
// again; a replacement would join the same way, by its handle. See README.md.
//   reconfigure_service STORE_PATH ID MEMBERS      (ID: 0 .. MEMBERS-1, one per process)
#include <plexus/plexus.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

// Sums (id + 1) over the group's members; prints what this member saw. False on an error.
bool SumAndSay(plexus::ProcessGroup& group, int id, int64_t uuid) {
  std::vector<float> values(1024, static_cast<float>(id + 1));
  auto work =
      group.AllReduce(plexus::Tensor::Flat(values.data(), plexus::DType::kFloat32, values.size()));
  absl::Status done = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
  if (!done.ok()) {
    std::fprintf(stderr, "member %d: uuid %lld: %s\n", id, static_cast<long long>(uuid),
                 done.ToString().c_str());
    return false;
  }
  std::printf("member %d: uuid %lld: rank %d of %d, sum %.1f\n", id, static_cast<long long>(uuid),
              group.rank(), group.size(), values[0]);
  return group.Shutdown(absl::Seconds(60)).ok();  // Collective: every member leaves it.
}

// Publishes this process's handle as handle/<id>, then reads all `members` handles (each read
// waits for the key up to the store's timeout). Here each reads them all; a coordinator would
// choose.
absl::StatusOr<std::vector<std::string>> ExchangeHandles(plexus::Store& store,
                                                         const plexus::Reconfigurer& self, int id,
                                                         int members) {
  absl::Status published = store.Set("handle/" + std::to_string(id), self.handle());
  if (!published.ok()) return published;
  std::vector<std::string> handles;
  for (int other = 0; other < members; ++other) {
    absl::StatusOr<std::string> handle = store.Get("handle/" + std::to_string(other));
    if (!handle.ok()) return handle.status();
    handles.push_back(*std::move(handle));
  }
  return handles;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s STORE_PATH ID MEMBERS\n", argv[0]);
    return 2;
  }
  const int id = std::atoi(argv[2]), members = std::atoi(argv[3]);
  auto store = plexus::FileStore::Open(argv[1], absl::Seconds(60));
  if (!store.ok()) {
    std::fprintf(stderr, "member %d: %s\n", id, store.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<plexus::Store> shared = std::move(*store);
  plexus::Reconfigurer::Options options;
  options.store = shared;  // Every process that may ever be a member uses the same store.
  options.backend = "tcp";
  options.timeout = absl::Seconds(60);
  plexus::Reconfigurer self(options);
  auto handles = ExchangeHandles(*shared, self, id, members);
  if (!handles.ok()) {
    std::fprintf(stderr, "member %d: %s\n", id, handles.status().ToString().c_str());
    return 1;
  }
  for (int64_t uuid : {1, 2}) {  // A fresh uuid for every configuration.
    auto group = self.Reconfigure({uuid, *handles});
    if (!group.ok()) {
      std::fprintf(stderr, "member %d: %s\n", id, group.status().ToString().c_str());
      return 1;
    }
    if (!SumAndSay(**group, id, uuid)) return 1;
    if (id == members - 1) return 0;  // The last member leaves.
    handles->pop_back();
  }
  return 0;
}
