// An out-of-tree backend: written outside backends/, against the public extension points only
// (Backend, BackendRegistry, Transport, and the shared CollectivesBackend + algorithms/), and
// registered at run time under a new name. It is what docs/backends.md walks through.
//
// "kvstore" moves every message through the group's key-value Store: a send is a Set of
// "kv/<src>/<dst>/<tag>/<n>", a receive waits for that key, takes it and deletes it. Slow, but
// every collective, dtype and op works, because algorithms/ runs them over this Transport.
#ifndef PLEXUS_TESTS_OUT_OF_TREE_KVSTORE_BACKEND_H_
#define PLEXUS_TESTS_OUT_OF_TREE_KVSTORE_BACKEND_H_

#include "absl/status/status.h"

namespace kvstore_example {

inline constexpr char kBackendName[] = "kvstore";

// Registers "kvstore" for cpu tensors; AlreadyExists when called twice.
absl::Status RegisterKvStoreBackend();

}  // namespace kvstore_example

#endif  // PLEXUS_TESTS_OUT_OF_TREE_KVSTORE_BACKEND_H_
