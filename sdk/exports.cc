// Keeps the public API in libplexus.so. A shared library built from static archives contains
// only the objects something references; the table below references one entry point of each
// public object file, so a service linking -lplexus finds all of it.
#include "sdk/plexus.h"

namespace plexus {
namespace {

// HashStore is header-constructed; its methods live in hash_store.cc.
using HashStoreSet = absl::Status (HashStore::*)(absl::string_view, absl::string_view);
using PrefixStoreSet = absl::Status (PrefixStore::*)(absl::string_view, absl::string_view);
const HashStoreSet kHashStoreSet = &HashStore::Set;
const PrefixStoreSet kPrefixStoreSet = &PrefixStore::Set;
using ReconfigureCall =
    absl::StatusOr<std::shared_ptr<ProcessGroup>> (Reconfigurer::*)(Reconfigurer::Request);
const ReconfigureCall kReconfigure = &Reconfigurer::Reconfigure;

}  // namespace

extern "C" {
// `used` keeps the table (and so what it points at) although nothing reads it.
__attribute__((used)) const void* const plexus_public_entry_points[] = {
    reinterpret_cast<const void*>(&Session::Join),
    reinterpret_cast<const void*>(&InitProcessGroup),
    &kReconfigure,
    reinterpret_cast<const void*>(&TCPStore::Create),
    reinterpret_cast<const void*>(&FileStore::Open),
    reinterpret_cast<const void*>(&elastic::Communicator::Create),
    reinterpret_cast<const void*>(&elastic::MasterNode::Create),
    reinterpret_cast<const void*>(&auth::TlsContext::Create),
    reinterpret_cast<const void*>(&WaitAll),
    reinterpret_cast<const void*>(&ParseDevice),
    reinterpret_cast<const void*>(&DTypeName),
    &kHashStoreSet,
    &kPrefixStoreSet,
};
}

}  // namespace plexus
