// NcclApi: the NCCL functions the backend calls, loaded from libnccl at run time.
//
// Like the CUDA runtime (devices/cuda/cuda_api.h), NCCL is never linked. It comes from
// PLEXUS_NCCL_LIBRARY when set; else a libnccl.so.2 already loaded (torch's), else
// libnccl.so.2 on the loader's search path, else the one in the toolkit the build found.
#ifndef PLEXUS_BACKENDS_NCCL_NCCL_API_H_
#define PLEXUS_BACKENDS_NCCL_NCCL_API_H_

#include <nccl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus::nccl {

struct NcclApi {
  decltype(&::ncclGetVersion) GetVersion;
  decltype(&::ncclGetErrorString) GetErrorString;
  decltype(&::ncclGetLastError) GetLastError;
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig;
  decltype(&::ncclCommAbort) CommAbort;
  decltype(&::ncclCommFinalize) CommFinalize;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclBroadcast) Broadcast;
  decltype(&::ncclReduce) Reduce;
  decltype(&::ncclAllGather) AllGather;
  decltype(&::ncclReduceScatter) ReduceScatter;
  decltype(&::ncclSend) Send;
  decltype(&::ncclRecv) Recv;
  decltype(&::ncclGroupStart) GroupStart;
  decltype(&::ncclGroupEnd) GroupEnd;
  decltype(&::ncclRedOpCreatePreMulSum) RedOpCreatePreMulSum;
  decltype(&::ncclRedOpDestroy) RedOpDestroy;

  int version = 0;  // As ncclGetVersion reports it, e.g. 22809 for 2.28.9.
  std::string library_path;
};

// NCCL, loaded once per process; FailedPrecondition naming every place tried when absent.
absl::StatusOr<const NcclApi*> LoadNcclApi();

// "2.28.9" from a version code.
std::string NcclVersionString(int version);

// OK for ncclSuccess. Otherwise "<what>: <error string> (<last error>)" as Unavailable for
// remote and system errors (a peer or the network failed), InvalidArgument for invalid
// arguments and usage, Internal otherwise.
absl::Status NcclStatus(const NcclApi& api, ncclResult_t result, absl::string_view what,
                        ncclComm_t comm = nullptr);

// As NcclStatus, for a call that enqueues work on a non-blocking communicator: ncclInProgress
// means NCCL accepted it and finishes the launch asynchronously (the caller then polls
// ncclCommGetAsyncError, as NcclCommunicator::Launch does), so it is OK here.
absl::Status NcclLaunchStatus(const NcclApi& api, ncclResult_t result, absl::string_view what,
                              ncclComm_t comm);

}  // namespace plexus::nccl

#endif  // PLEXUS_BACKENDS_NCCL_NCCL_API_H_
