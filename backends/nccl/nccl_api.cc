#include "backends/nccl/nccl_api.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/environment.h"
#include "devices/cuda/dynamic_library.h"

#ifndef PLEXUS_CUDA_ROOT
#define PLEXUS_CUDA_ROOT "/usr/local/cuda"
#endif

namespace plexus::nccl {
namespace {

absl::StatusOr<NcclApi> Load() {
  std::vector<std::string> candidates;
  if (const char* path = ReadEnvironment("PLEXUS_NCCL_LIBRARY"); path != nullptr && *path) {
    candidates.push_back(path);
  } else {
    candidates = {"libnccl.so.2", PLEXUS_CUDA_ROOT "/lib64/libnccl.so.2"};
  }
  auto library = cuda::DynamicLibrary::OpenFirst("NCCL", candidates);
  if (!library.ok()) return library.status();
  NcclApi api;
  api.library_path = library->path();
  cuda::SymbolLoader load(*library);
  load("ncclGetVersion", &api.GetVersion);
  load("ncclGetErrorString", &api.GetErrorString);
  load("ncclGetLastError", &api.GetLastError);
  load("ncclGetUniqueId", &api.GetUniqueId);
  load("ncclCommInitRankConfig", &api.CommInitRankConfig);
  load("ncclCommAbort", &api.CommAbort);
  load("ncclCommFinalize", &api.CommFinalize);
  load("ncclCommDestroy", &api.CommDestroy);
  load("ncclCommGetAsyncError", &api.CommGetAsyncError);
  load("ncclAllReduce", &api.AllReduce);
  load("ncclBroadcast", &api.Broadcast);
  load("ncclReduce", &api.Reduce);
  load("ncclAllGather", &api.AllGather);
  load("ncclReduceScatter", &api.ReduceScatter);
  load("ncclSend", &api.Send);
  load("ncclRecv", &api.Recv);
  load("ncclGroupStart", &api.GroupStart);
  load("ncclGroupEnd", &api.GroupEnd);
  load("ncclRedOpCreatePreMulSum", &api.RedOpCreatePreMulSum);
  load("ncclRedOpDestroy", &api.RedOpDestroy);
  if (!load.status().ok()) return load.status();
  if (api.GetVersion(&api.version) != ncclSuccess) api.version = 0;
  // Non-blocking communicators and ncclCommGetAsyncError polling as used here need 2.14+.
  if (api.version < 21400) {
    return absl::FailedPreconditionError(absl::StrCat(api.library_path, " is NCCL ",
                                                      NcclVersionString(api.version),
                                                      "; plexus needs 2.14 or newer"));
  }
  library->Leak();
  return api;
}

}  // namespace

absl::StatusOr<const NcclApi*> LoadNcclApi() {
  static const absl::StatusOr<NcclApi>* loaded = new absl::StatusOr<NcclApi>(Load());
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

std::string NcclVersionString(int version) {
  // Codes below 2.9 were X*1000 + Y*100 + Z; later ones X*10000 + Y*100 + Z.
  if (version < 20900)
    return absl::StrCat(version / 1000, ".", version % 1000 / 100, ".", version % 100);
  return absl::StrCat(version / 10000, ".", version % 10000 / 100, ".", version % 100);
}

absl::Status NcclStatus(const NcclApi& api, ncclResult_t result, absl::string_view what,
                        ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string detail = absl::StrCat(what, ": ", api.GetErrorString(result));
  const char* last = api.GetLastError(comm);
  if (last != nullptr && *last != '\0') absl::StrAppend(&detail, " (", last, ")");
  switch (result) {
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(detail);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(detail);
    default:
      return absl::InternalError(detail);
  }
}

absl::Status NcclLaunchStatus(const NcclApi& api, ncclResult_t result, absl::string_view what,
                              ncclComm_t comm) {
  if (result == ncclInProgress) return absl::OkStatus();
  return NcclStatus(api, result, what, comm);
}

}  // namespace plexus::nccl
