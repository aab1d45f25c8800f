// The NCCL half of libfake_cuda.so (see fake_device.h): communicators of separate processes
// that meet in a directory and pass messages as files.
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/half.h"
#include "tests/fake_cuda/fake_device.h"

namespace fake_nccl {
namespace {

std::string BaseDirectory() {
  for (const char* name : {"FAKE_NCCL_DIR", "TEST_TMPDIR", "TMPDIR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value) return value;
  }
  return "/tmp";
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// Writes a whole file so that readers see all of it or nothing.
void WriteAtomically(const std::string& path, const void* data, size_t bytes) {
  const std::string temporary = path + ".partial";
  FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) return;
  if (bytes > 0) std::fwrite(data, 1, bytes, file);
  std::fclose(file);
  std::rename(temporary.c_str(), path.c_str());
}

size_t TypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

struct Comm {
  std::string directory;
  int rank = 0;
  int size = 1;
  int device = 0;
  bool blocking = true;  // Non-blocking communicators answer launches with ncclInProgress.
  std::atomic<bool> aborted{false};
  std::atomic<int> state{ncclInProgress};  // In progress until every rank joined.
  std::vector<pid_t> pids;
  std::vector<uint64_t> sent;      // Messages sent to each peer (stream thread only).
  std::vector<uint64_t> received;  // Messages received from each peer (stream thread only).
  std::mutex ops_mu;
  std::map<int, double> premul_scales;
  int next_op = ncclNumOps;
};

// Checks whether every rank has joined; fills in their pids when so.
void CheckJoined(Comm* comm) {
  if (comm->state.load() != ncclInProgress) return;
  std::vector<pid_t> pids;
  for (int r = 0; r < comm->size; ++r) {
    std::ifstream in(comm->directory + "/joined." + std::to_string(r));
    long pid = 0;
    if (!(in >> pid)) return;
    pids.push_back(static_cast<pid_t>(pid));
  }
  comm->pids = pids;
  comm->state.store(ncclSuccess);
}

std::string MessagePath(const Comm* comm, int from, int to, uint64_t number) {
  return comm->directory + "/msg." + std::to_string(from) + "." + std::to_string(to) + "." +
         std::to_string(number);
}

void SendMessage(Comm* comm, int peer, const void* data, size_t bytes) {
  WriteAtomically(MessagePath(comm, comm->rank, peer, comm->sent[peer]++), data, bytes);
}

// Waits for the next message from `peer`; false when aborted or the peer died (which is then
// the communicator's asynchronous error, as NCCL reports a lost peer).
bool ReceiveMessage(Comm* comm, int peer, void* data, size_t bytes) {
  const std::string path = MessagePath(comm, peer, comm->rank, comm->received[peer]);
  auto pause = std::chrono::microseconds(100);
  while (!Exists(path)) {
    if (comm->aborted.load()) return false;
    if (kill(comm->pids[peer], 0) != 0 && errno == ESRCH) {
      comm->state.store(ncclRemoteError);
      return false;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(2)) pause *= 2;
  }
  ++comm->received[peer];
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file != nullptr) {
    if (bytes > 0 && std::fread(data, 1, bytes, file) != bytes) std::memset(data, 0, bytes);
    std::fclose(file);
  }
  std::remove(path.c_str());
  return true;
}

// --- Reductions, in rank order, as every rank computes the same bits ---

struct Operator {
  ncclRedOp_t kind;  // ncclSum, ncclProd, ncclMax, ncclMin or ncclAvg; ncclSum for premul.
  double scale = 1.0;
  bool premul = false;
};

template <typename T>
struct Native {
  using Compute = T;
  static Compute Load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, size_t i, Compute v) { static_cast<T*>(p)[i] = v; }
};
struct Half {
  using Compute = float;
  static float Load(const void* p, size_t i) {
    return plexus::algorithms::HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, size_t i, float v) {
    static_cast<uint16_t*>(p)[i] = plexus::algorithms::FloatToHalf(v);
  }
};
struct BFloat {
  using Compute = float;
  static float Load(const void* p, size_t i) {
    return plexus::algorithms::BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, size_t i, float v) {
    static_cast<uint16_t*>(p)[i] = plexus::algorithms::FloatToBFloat16(v);
  }
};

template <typename Codec>
void ReduceTyped(void* out, const std::vector<const void*>& inputs, size_t count,
                 const Operator& op) {
  using C = typename Codec::Compute;
  const size_t n = inputs.size();
  for (size_t i = 0; i < count; ++i) {
    C value = Codec::Load(inputs[0], i);
    if (op.premul) value = static_cast<C>(value * op.scale);
    for (size_t r = 1; r < n; ++r) {
      C next = Codec::Load(inputs[r], i);
      if (op.premul) next = static_cast<C>(next * op.scale);
      switch (op.kind) {
        case ncclSum:
        case ncclAvg:
          value = static_cast<C>(value + next);
          break;
        case ncclProd:
          value = static_cast<C>(value * next);
          break;
        case ncclMax:
          value = next > value ? next : value;
          break;
        case ncclMin:
          value = next < value ? next : value;
          break;
        default:
          break;
      }
    }
    if (op.kind == ncclAvg) value = static_cast<C>(value / static_cast<C>(n));
    Codec::Store(out, i, value);
  }
}

void Reduce(void* out, const std::vector<const void*>& inputs, size_t count, ncclDataType_t type,
            const Operator& op) {
  switch (type) {
    case ncclInt8:
      return ReduceTyped<Native<int8_t>>(out, inputs, count, op);
    case ncclUint8:
      return ReduceTyped<Native<uint8_t>>(out, inputs, count, op);
    case ncclInt32:
      return ReduceTyped<Native<int32_t>>(out, inputs, count, op);
    case ncclUint32:
      return ReduceTyped<Native<uint32_t>>(out, inputs, count, op);
    case ncclInt64:
      return ReduceTyped<Native<int64_t>>(out, inputs, count, op);
    case ncclUint64:
      return ReduceTyped<Native<uint64_t>>(out, inputs, count, op);
    case ncclFloat16:
      return ReduceTyped<Half>(out, inputs, count, op);
    case ncclBfloat16:
      return ReduceTyped<BFloat>(out, inputs, count, op);
    case ncclFloat32:
      return ReduceTyped<Native<float>>(out, inputs, count, op);
    case ncclFloat64:
      return ReduceTyped<Native<double>>(out, inputs, count, op);
    default:
      return;
  }
}

// --- Launching: an operation posts its sends, then finishes (receives, reduces, writes) ---

struct Step {
  Comm* comm;
  void* stream;
  std::function<void()> post;
  std::function<void()> finish;
};

thread_local int group_depth = 0;
thread_local std::vector<Step> grouped;

ncclResult_t Launch(Comm* comm, void* stream, std::function<void()> post,
                    std::function<void()> finish) {
  if (comm == nullptr || comm->aborted.load()) return ncclInvalidUsage;
  if (comm->state.load() == ncclInProgress) CheckJoined(comm);
  Step step{comm, stream, std::move(post), std::move(finish)};
  if (group_depth > 0) {
    grouped.push_back(std::move(step));
    return ncclSuccess;
  }
  fake_cuda::StreamFor(stream)->Enqueue([step] {
    if (step.comm->aborted.load()) return;
    if (step.post) step.post();
    if (step.finish) step.finish();
  });
  // As real NCCL may: accepted, finished asynchronously (ncclCommGetAsyncError says when).
  return comm->blocking ? ncclSuccess : ncclInProgress;
}

std::vector<uint8_t> Snapshot(const void* data, size_t bytes) {
  const uint8_t* begin = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(begin, begin + bytes);
}

}  // namespace
}  // namespace fake_nccl

using fake_nccl::Comm;

namespace {

Comm* AsComm(ncclComm_t comm) { return reinterpret_cast<Comm*>(comm); }

fake_nccl::Operator OperatorFor(Comm* comm, ncclRedOp_t op) {
  fake_nccl::Operator result{op};
  if (op >= ncclNumOps) {
    std::lock_guard<std::mutex> lock(comm->ops_mu);
    result.kind = ncclSum;
    result.premul = true;
    result.scale = comm->premul_scales[op];
  }
  return result;
}

// The shared shape of all-reduce, reduce and reduce-scatter: everyone's input goes to whoever
// needs it, and each receiver reduces its block in rank order. `root` -1 means every rank.
ncclResult_t LaunchReduction(const void* send, void* recv, size_t total, size_t block_offset,
                             size_t block_count, ncclDataType_t type, ncclRedOp_t op, int root,
                             Comm* comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  const size_t element = fake_nccl::TypeSize(type);
  const fake_nccl::Operator reduction = OperatorFor(comm, op);
  auto own = std::make_shared<std::vector<uint8_t>>();
  auto post = [=] {
    *own = fake_nccl::Snapshot(send, total * element);
    for (int peer = 0; peer < comm->size; ++peer) {
      if (peer == comm->rank || (root >= 0 && peer != root)) continue;
      fake_nccl::SendMessage(comm, peer, own->data(), own->size());
    }
  };
  auto finish = [=] {
    if (root >= 0 && comm->rank != root) return;
    std::vector<std::vector<uint8_t>> theirs(comm->size);
    std::vector<const void*> inputs;
    for (int peer = 0; peer < comm->size; ++peer) {
      if (peer != comm->rank) {
        theirs[peer].resize(total * element);
        if (!fake_nccl::ReceiveMessage(comm, peer, theirs[peer].data(), theirs[peer].size())) {
          return;
        }
      }
    }
    for (int peer = 0; peer < comm->size; ++peer) {
      const uint8_t* base = peer == comm->rank ? own->data() : theirs[peer].data();
      inputs.push_back(base + block_offset * element);
    }
    fake_nccl::Reduce(recv, inputs, block_count, type, reduction);
  };
  return fake_nccl::Launch(comm, stream, post, finish);
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  const char* text = std::getenv("FAKE_NCCL_VERSION");
  *version = text != nullptr ? std::atoi(text) : NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unhandled error";
  }
}

const char* ncclGetLastError(ncclComm_t) { return "(fake NCCL)"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, NCCL_UNIQUE_ID_BYTES);
  std::random_device random;
  std::ostringstream text;
  text << "fake-nccl-" << std::hex << random() << random() << getpid();
  std::strncpy(id->internal, text.str().c_str(), NCCL_UNIQUE_ID_BYTES - 1);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto* comm = new Comm;
  comm->directory = fake_nccl::BaseDirectory() + "/" + std::string(id.internal);
  comm->rank = rank;
  comm->size = nranks;
  comm->device = fake_cuda::CurrentDevice();
  comm->sent.assign(nranks, 0);
  comm->received.assign(nranks, 0);
  mkdir(comm->directory.c_str(), 0700);
  const std::string pid = std::to_string(getpid());
  fake_nccl::WriteAtomically(comm->directory + "/joined." + std::to_string(rank), pid.data(),
                             pid.size());
  *out = reinterpret_cast<ncclComm_t>(comm);
  fake_nccl::CheckJoined(comm);
  const bool blocking = config == nullptr || config->blocking != 0;
  comm->blocking = blocking;
  while (blocking && comm->state.load() == ncclInProgress) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    fake_nccl::CheckJoined(comm);
  }
  return comm->state.load() == ncclSuccess ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t handle, ncclResult_t* state) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr) return ncclInvalidArgument;
  fake_nccl::CheckJoined(comm);
  *state = static_cast<ncclResult_t>(comm->state.load());
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t handle) {
  // The communicator is left allocated: stream steps may still hold it.
  if (handle != nullptr) AsComm(handle)->aborted.store(true);
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t handle) { return ncclCommAbort(handle); }

ncclResult_t ncclGroupStart() {
  ++fake_nccl::group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (fake_nccl::group_depth == 0) return ncclInvalidUsage;
  if (--fake_nccl::group_depth > 0) return ncclSuccess;
  std::vector<fake_nccl::Step> steps;
  steps.swap(fake_nccl::grouped);
  if (steps.empty()) return ncclSuccess;
  bool blocking = true;
  for (const fake_nccl::Step& step : steps) blocking = blocking && step.comm->blocking;
  // Every operation of the group posts its sends before any waits to receive.
  fake_cuda::StreamFor(steps[0].stream)->Enqueue([steps] {
    for (const fake_nccl::Step& step : steps) {
      if (!step.comm->aborted.load() && step.post) step.post();
    }
    for (const fake_nccl::Step& step : steps) {
      if (!step.comm->aborted.load() && step.finish) step.finish();
    }
  });
  return blocking ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t, ncclComm_t handle) {
  Comm* comm = AsComm(handle);
  double scale = 0;
  switch (type) {
    case ncclFloat32:
      scale = *static_cast<float*>(scalar);
      break;
    case ncclFloat64:
      scale = *static_cast<double*>(scalar);
      break;
    case ncclFloat16:
      scale = plexus::algorithms::HalfToFloat(*static_cast<uint16_t*>(scalar));
      break;
    case ncclBfloat16:
      scale = plexus::algorithms::BFloat16ToFloat(*static_cast<uint16_t*>(scalar));
      break;
    default:
      return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(comm->ops_mu);
  *op = static_cast<ncclRedOp_t>(comm->next_op++);
  comm->premul_scales[*op] = scale;
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t handle) {
  Comm* comm = AsComm(handle);
  std::lock_guard<std::mutex> lock(comm->ops_mu);
  // Kept until the queued steps that captured it ran: erase only the name, not the value.
  return comm->premul_scales.count(op) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return LaunchReduction(send, recv, count, 0, count, type, op, -1, AsComm(comm), stream);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return LaunchReduction(send, recv, count, 0, count, type, op, root, AsComm(comm), stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t handle, cudaStream_t stream) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr) return ncclInvalidArgument;
  return LaunchReduction(send, recv, count * comm->size, count * comm->rank, count, type, op, -1,
                         comm, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t handle, cudaStream_t stream) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr) return ncclInvalidArgument;
  const size_t bytes = count * fake_nccl::TypeSize(type);
  auto post = [=] {
    if (comm->rank != root) return;
    for (int peer = 0; peer < comm->size; ++peer) {
      if (peer != root) fake_nccl::SendMessage(comm, peer, send, bytes);
    }
  };
  auto finish = [=] {
    if (comm->rank == root) {
      if (recv != send && bytes > 0) std::memmove(recv, send, bytes);
    } else {
      fake_nccl::ReceiveMessage(comm, root, recv, bytes);
    }
  };
  return fake_nccl::Launch(comm, stream, post, finish);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t handle, cudaStream_t stream) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr) return ncclInvalidArgument;
  const size_t bytes = count * fake_nccl::TypeSize(type);
  auto own = std::make_shared<std::vector<uint8_t>>();
  auto post = [=] {
    *own = fake_nccl::Snapshot(send, bytes);
    for (int peer = 0; peer < comm->size; ++peer) {
      if (peer != comm->rank) fake_nccl::SendMessage(comm, peer, own->data(), bytes);
    }
  };
  auto finish = [=] {
    uint8_t* out = static_cast<uint8_t*>(recv);
    for (int peer = 0; peer < comm->size; ++peer) {
      if (peer == comm->rank) {
        if (bytes > 0) std::memcpy(out + peer * bytes, own->data(), bytes);
      } else if (!fake_nccl::ReceiveMessage(comm, peer, out + peer * bytes, bytes)) {
        return;
      }
    }
  };
  return fake_nccl::Launch(comm, stream, post, finish);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t handle, cudaStream_t stream) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr || peer < 0 || peer >= comm->size) return ncclInvalidArgument;
  const size_t bytes = count * fake_nccl::TypeSize(type);
  return fake_nccl::Launch(
      comm, stream, [=] { fake_nccl::SendMessage(comm, peer, send, bytes); }, nullptr);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t handle,
                      cudaStream_t stream) {
  Comm* comm = AsComm(handle);
  if (comm == nullptr || peer < 0 || peer >= comm->size) return ncclInvalidArgument;
  const size_t bytes = count * fake_nccl::TypeSize(type);
  return fake_nccl::Launch(comm, stream, nullptr,
                           [=] { fake_nccl::ReceiveMessage(comm, peer, recv, bytes); });
}
