// plexus for C++: the one header a service includes (installed as <plexus/plexus.h>).
//
// Public, and kept compatible: everything this header declares through the headers below -
// Session (joining the job, RAII departure), InitOptions/InitProcessGroup, ProcessGroup and its
// collectives, Work, Tensor/DType/Device/ReduceOp and the option structs, Reconfigurer
// (membership by handles, torch's reconfigure contract), the stores (TCPStore, FileStore,
// HashStore, PrefixStore), the elastic Communicator and MasterNode, TLS file options. Other headers
// under plexus/ are installed because these include them; they are internal and may change.
// Contracts (threading, ownership, deadlines, error codes) are on each declaration; docs/cpp.md is
// the guide.
#ifndef PLEXUS_SDK_PLEXUS_H_
#define PLEXUS_SDK_PLEXUS_H_

#include "base/auth/tls.h"
#include "base/core/device.h"
#include "base/core/dtype.h"
#include "base/core/options.h"
#include "base/core/reduce_op.h"
#include "base/core/tensor.h"
#include "base/store/file_store.h"
#include "base/store/hash_store.h"
#include "base/store/prefix_store.h"
#include "base/store/tcp_store.h"
#include "base/work/work.h"
#include "frontend/dispatch/init.h"
#include "frontend/dispatch/process_group.h"
#include "frontend/dispatch/reconfigure.h"
#include "frontend/dispatch/session.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_node.h"

namespace plexus {

// The version of the installed library (also in plexus.pc and plexusConfigVersion.cmake).
inline constexpr int kVersionMajor = 0;
inline constexpr int kVersionMinor = 1;
inline constexpr int kVersionPatch = 0;

}  // namespace plexus

#endif  // PLEXUS_SDK_PLEXUS_H_
