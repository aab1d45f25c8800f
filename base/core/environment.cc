#include "base/core/environment.h"

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/core/byte_size.h"
#include "base/core/logging.h"
#include "base/core/mutex.h"

namespace plexus {
namespace {

// Sorted by name (core_test checks it).
constexpr EnvironmentVariable kVariables[] = {
    {"PLEXUS_ALGO", "algorithm spec", "the built-in table",
     "Overrides the algorithm chosen per collective and size range, e.g. "
     "`all_reduce:0-64K:rd,64K-:ring`.",
     "algorithms.md, algorithm_names.md"},
    {"PLEXUS_ANCHORS", "directory", "`../shared/anchors` beside the checkout",
     "Where `bench --anchor` finds `run.sh`, the script that runs Open MPI side by side.",
     "benchmarks.md"},
    {"PLEXUS_BACKEND", "backend string", "`tcp`",
     "The backend of `init_process_group()` and `Session::Join()` when the call names none.",
     "python.md, cpp.md"},
    {"PLEXUS_CHECK_COLLECTIVES", "0 or 1", "1",
     "0 skips the agreement check (one small all-gather) that runs before each collective on "
     "backends that cannot tell mismatched collectives apart themselves.",
     "backends.md"},
    {"PLEXUS_CUDART_LIBRARY", "path", "a loaded `libcudart.so.13`, else the build's toolkit",
     "The CUDA runtime library to load when a CUDA tensor is first used.",
     "backends.md#nccl-nvidia-nccl-cuda-tensors"},
    {"PLEXUS_DEBIAN13_ROOT", "directory", "`/var/cache/plexus/debian13`",
     "Where `tools/debian/run.sh trixie` keeps the Debian 13 root it builds and tests in.",
     "building.md#other-debians-on-a-debian-12-machine"},
    {"PLEXUS_DEBIAN_MIRROR", "URL", "the Debian archive apt uses here",
     "The archive `tools/debian/run.sh` makes its Debian 13 and forky roots from.",
     "building.md#other-debians-on-a-debian-12-machine"},
    {"PLEXUS_ELASTIC_TIMEOUT", "seconds", "600",
     "The deadline of each elastic call when the Communicator sets none.", "elastic.md"},
    {"PLEXUS_FLIGHT_RECORDER", "integer", "2000",
     "Operations each process group's flight recorder keeps; 0 turns recording off.",
     "debugging.md#the-flight-recorder"},
    {"PLEXUS_FLIGHT_RECORDER_DIR", "directory", "`$TMPDIR`, else `/tmp`",
     "Where flight-recorder dumps are written.", "debugging.md#the-flight-recorder"},
    {"PLEXUS_FORKY_ROOT", "directory", "`/var/cache/plexus/forky`",
     "Where `tools/debian/run.sh forky` keeps the Debian forky root it builds and tests in.",
     "building.md#other-debians-on-a-debian-12-machine"},
    {"PLEXUS_GLOO_ADDR", "address", "the address chosen for the rank",
     "The address Gloo's TCP device binds to and advertises.", "backends.md#gloo-debians-libgloo"},
    {"PLEXUS_GLOO_NATIVE", "0 or 1", "1",
     "0 runs every gloo collective through plexus's algorithms over Gloo's point-to-point "
     "calls instead of Gloo's own collectives.",
     "backends.md#gloo-debians-libgloo"},
    {"PLEXUS_GPU_SUITE_DEADLINE", "seconds", "300",
     "How long `gpu_pack/run.sh` gives each suite on the GPU machine.",
     "backends.md#testing-cuda-without-a-gpu-and-on-one"},
    {"PLEXUS_HEARTBEAT", "duration (`5s`, `500ms`, `2.5`, `off`)", "`5s`",
     "Silence after which a peer or server counts as lost; idle connections beat every fifth "
     "of it. At least 100 ms.",
     "debugging.md#frozen-and-lost-ranks-heartbeats"},
    {"PLEXUS_HOST_ID", "string", "unset: the machine's boot id and namespaces",
     "Ranks of one machine with different values count as different hosts (no shared memory "
     "between them).",
     "architecture.md#ranks-on-one-host-shared-memory"},
    {"PLEXUS_LOG_LEVEL", "`error`, `warning`, `info` or `debug`", "`warning`",
     "What plexus writes to stderr.", "backends.md"},
    {"PLEXUS_MPI_DIRECT", "0 or 1", "1 where the host has a core per rank",
     "Whether threads that wait on the mpi backend drive MPI themselves instead of handing "
     "over to its progress thread.",
     "backends.md#mpi-debians-open-mpi"},
    {"PLEXUS_MPI_STORE_ADDR", "address", "this host's name",
     "Under mpirun, the address rank 0 offers for the rendezvous store.", "multi_host.md"},
    {"PLEXUS_MPI_THREAD_LEVEL", "`funneled`", "`MPI_THREAD_MULTIPLE` where offered",
     "`funneled` asks MPI for `MPI_THREAD_FUNNELED` only.", "backends.md#mpi-debians-open-mpi"},
    {"PLEXUS_NCCL_LIBRARY", "path", "`libnccl.so.2` on the loader's path, else the toolkit's",
     "The NCCL library to load when a CUDA tensor first needs it.",
     "backends.md#nccl-nvidia-nccl-cuda-tensors"},
    {"PLEXUS_SECRET", "string, at least 16 bytes", "unset: no authentication",
     "The shared secret every store, data and elastic-master connection proves both ways.",
     "security.md#shared-secret-authentication"},
    {"PLEXUS_SECRET_FILE", "path", "unset",
     "A file holding the shared secret; `PLEXUS_SECRET` wins when both are set.",
     "security.md#shared-secret-authentication"},
    {"PLEXUS_SHM_ARENA_BYTES", "bytes (`32M`, `4096`: K, M, G are binary)", "32M",
     "Each rank's region of the shared-memory arena same-host collectives run on (memory is "
     "used as touched: 4 MiB of it unless other work crowds the cores); 0 for none.",
     "backends.md#tcp-in-house"},
    {"PLEXUS_SHM_RING_BYTES", "bytes, a power of two (`4M`, `65536`)", "4M",
     "Each shared-memory ring between two ranks of one host.", "backends.md#tcp-in-house"},
    {"PLEXUS_SOCKET_IFNAME", "interface list (NCCL's syntax: `eth0`, `^docker`, `=ib0`)",
     "unset: the interface of the route to the store",
     "Which interfaces a rank may advertise its address on.", "multi_host.md"},
    {"PLEXUS_TCP_ADDR", "address", "unset", "The address a rank advertises, chosen by hand.",
     "multi_host.md"},
    {"PLEXUS_TLS_CA", "path (PEM bundle)", "unset: peers' certificates are not verified",
     "The CAs whose certificates this process trusts (mutual TLS).", "security.md#tls"},
    {"PLEXUS_TLS_CERT", "path (PEM chain)", "unset: no TLS",
     "This process's certificate; set, every plexus connection runs TLS 1.3.", "security.md#tls"},
    {"PLEXUS_TLS_KEY", "path (PEM)", "unset", "The private key of `PLEXUS_TLS_CERT`.",
     "security.md#tls"},
    {"PLEXUS_TORCH_BACKEND", "backend string",
     "`cpu:tcp,cuda:nccl` where NCCL is built, else `tcp`",
     "The plexus backends a torch.distributed group of backend \"plexus\" runs on.", "python.md"},
    {"PLEXUS_TRANSPORT", "`auto`, `tcp` or `shm`", "`auto`",
     "Same-host ranks of `cpu:tcp`: shared memory where possible, never, or required.",
     "backends.md#tcp-in-house"},
    {"PLEXUS_WAIT", "`adaptive`, `spin` or `sleep`", "`adaptive`",
     "How `cpu:tcp` ranks wait for peers: spin first while the cores are the ranks' own, "
     "always spin first, or always sleep at once.",
     "benchmarks.md#when-ranks-share-cores-with-other-work"},
};

}  // namespace

absl::Span<const EnvironmentVariable> EnvironmentVariables() { return kVariables; }

const EnvironmentVariable* FindEnvironmentVariable(absl::string_view name) {
  for (const EnvironmentVariable& variable : kVariables) {
    if (name == variable.name) return &variable;
  }
  return nullptr;
}

const char* ReadEnvironment(const char* name) {
  if (FindEnvironmentVariable(name) == nullptr) {
    static Mutex* mu = new Mutex;
    static std::set<std::string>* reported = new std::set<std::string>;
    MutexLock lock(*mu);
    if (reported->insert(name).second) {
      Log(LogLevel::kError, absl::StrCat("plexus reads ", name,
                                         ", which base/core/"
                                         "environment.cc does not list (a plexus bug)"));
    }
  }
  return std::getenv(name);
}

namespace {

// The variable's text: its value when set and not empty, else the table's default. The entry
// must exist and have `type` (its first word); a mismatch is a plexus bug.
std::string TypedText(const char* name, absl::string_view type, bool* from_default) {
  const EnvironmentVariable* variable = FindEnvironmentVariable(name);
  if (variable == nullptr || !absl::StartsWith(variable->type, type)) {
    Log(LogLevel::kError, absl::StrCat("plexus reads ", name, " as ", type,
                                       ", which base/core/environment.cc does not list so "
                                       "(a plexus bug)"));
  }
  const char* value = ReadEnvironment(name);
  *from_default = value == nullptr || *value == '\0';
  if (!*from_default) return value;
  if (variable == nullptr) return "";
  std::string text = variable->default_value;
  absl::StrReplaceAll({{"`", ""}}, &text);
  return text;
}

absl::Status NotA(const char* name, absl::string_view text, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(name, "='", text, "' is not ", expected));
}

}  // namespace

absl::StatusOr<int64_t> EnvironmentInteger(const char* name) {
  bool from_default = false;
  const std::string text = TypedText(name, "integer", &from_default);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) return NotA(name, text, "an integer");
  return value;
}

absl::StatusOr<absl::Duration> EnvironmentSeconds(const char* name) {
  bool from_default = false;
  const std::string text = TypedText(name, "seconds", &from_default);
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0)) {
    return NotA(name, text, "a positive number of seconds");
  }
  return absl::Seconds(seconds);
}

absl::StatusOr<uint64_t> EnvironmentBytes(const char* name) {
  bool from_default = false;
  const std::string text = TypedText(name, "bytes", &from_default);
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) return NotA(name, text, "a byte count (4096, 4K, 32M, 1G)");
  return bytes;
}

absl::StatusOr<bool> EnvironmentFlag(const char* name) {
  bool from_default = false;
  const std::string text = TypedText(name, "0 or 1", &from_default);
  if (text == "0") return false;
  if (text == "1") return true;
  return NotA(name, text, "0 or 1");
}

int64_t EnvironmentIntegerOrDefault(const char* name) {
  absl::StatusOr<int64_t> value = EnvironmentInteger(name);
  if (value.ok()) return *value;
  Log(LogLevel::kWarning, absl::StrCat(value.status().message(), "; using the default"));
  int64_t fallback = 0;
  const EnvironmentVariable* variable = FindEnvironmentVariable(name);
  if (variable != nullptr) (void)absl::SimpleAtoi(variable->default_value, &fallback);
  return fallback;
}

bool EnvironmentFlagOrDefault(const char* name) {
  absl::StatusOr<bool> value = EnvironmentFlag(name);
  if (value.ok()) return *value;
  Log(LogLevel::kWarning, absl::StrCat(value.status().message(), "; using the default"));
  const EnvironmentVariable* variable = FindEnvironmentVariable(name);
  return variable == nullptr || absl::string_view(variable->default_value) != "0";
}

}  // namespace plexus
