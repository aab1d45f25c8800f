#include "base/rendezvous/rendezvous.h"

#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/mutex.h"
#include "base/core/status_macros.h"
#include "base/net/route.h"
#include "base/net/socket_util.h"
#include "base/rendezvous/launcher_env.h"
#include "base/store/file_store.h"
#include "base/store/prefix_store.h"
#include "base/store/tcp_store.h"
#include "base/store/torch_store_client.h"

namespace plexus {
namespace {

struct ParsedUrl {
  std::string scheme;  // "env", "tcp", "file"
  std::string body;    // After "scheme://", before '?'.
  std::optional<std::string> rank;
  std::optional<std::string> world_size;
};

absl::StatusOr<ParsedUrl> ParseUrl(const std::string& url) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init_method '", url, "' is not a URL; use env://, tcp://host:port or file:///path"));
  }
  ParsedUrl parsed;
  parsed.scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  const size_t query = rest.find('?');
  if (query != std::string::npos) {
    for (absl::string_view pair : absl::StrSplit(rest.substr(query + 1), '&', absl::SkipEmpty())) {
      std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      const std::string value = kv.size() > 1 ? kv[1] : "";
      if (kv[0] == "rank") {
        parsed.rank = value;
      } else if (kv[0] == "world_size") {
        parsed.world_size = value;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("init_method '", url, "': unknown parameter '", kv[0], "'"));
      }
    }
    rest = rest.substr(0, query);
  }
  parsed.body = rest;
  return parsed;
}

absl::StatusOr<int> ParseInt(const std::string& what, const std::string& text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "' is not an integer"));
  }
  return value;
}

// Fills `value` from the first source that has it, unless already set (>= 0).
absl::Status ResolveInt(int& value, const std::optional<std::string>& from_url,
                        const std::vector<std::string>& env_names, const EnvLookup& env,
                        const std::string& what) {
  if (value >= 0) return absl::OkStatus();
  if (from_url.has_value()) {
    ASSIGN_OR_RETURN(value, ParseInt(absl::StrCat(what, " in init_method"), *from_url));
    return absl::OkStatus();
  }
  for (const std::string& name : env_names) {
    if (auto text = env(name); text.has_value()) {
      ASSIGN_OR_RETURN(value, ParseInt(name, *text));
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is not known: pass it, put it in the init_method URL, or set one of ",
                   absl::StrJoin(env_names, ", ")));
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& text,
                                                          const std::string& url) {
  absl::StatusOr<std::pair<std::string, int>> host_port = ParseHostPort(text);
  if (host_port.ok() && host_port->second == 0) {
    host_port = absl::InvalidArgumentError("port 0: a store needs a port to meet at");
  }
  if (!host_port.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_method '", url, "': ", host_port.status().message()));
  }
  return host_port;
}

absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(const std::string& host, int port, int rank,
                                                       int world_size, absl::Duration timeout,
                                                       const std::optional<std::string>& secret) {
  TCPStoreOptions options;
  options.host = host;
  if (!net::IsIpLiteral(host) && host != "localhost") options.bind_host = "*";
  options.port = port;
  options.is_server = rank == 0;
  options.world_size = world_size;
  options.wait_for_workers = false;  // The init barrier waits for everyone instead.
  options.timeout = timeout;
  options.secret = secret;
  ASSIGN_OR_RETURN(std::unique_ptr<TCPStore> store, TCPStore::Create(options));
  return std::shared_ptr<Store>(std::move(store));
}

// torchrun's agent already serves a torch TCPStore at the rendezvous address: join it.
absl::StatusOr<std::shared_ptr<Store>> JoinTorchrunAgentStore(const StoreAddress& where,
                                                              const std::string& prefix,
                                                              absl::Duration timeout) {
  auto client = TorchStoreClient::Connect(where.host, where.port, timeout);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("joining torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE"
                                     "=True) at ",
                                     where.source, ": ", client.status().message()));
  }
  return std::shared_ptr<Store>(
      std::make_shared<PrefixStore>(prefix, std::shared_ptr<Store>(std::move(client).value())));
}

struct SchemeTable {
  Mutex mu;
  std::map<std::string, RendezvousScheme> schemes ABSL_GUARDED_BY(mu);
};

SchemeTable& Schemes() {
  static auto* table = new SchemeTable;
  return *table;
}

std::optional<RendezvousScheme> FindScheme(const std::string& scheme) {
  SchemeTable& table = Schemes();
  MutexLock lock(table.mu);
  auto it = table.schemes.find(scheme);
  if (it == table.schemes.end()) return std::nullopt;
  return it->second;
}

}  // namespace

absl::Status RegisterRendezvousScheme(const std::string& scheme, RendezvousScheme handler) {
  if (scheme == "env" || scheme == "tcp" || scheme == "file" || scheme.empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat("rendezvous scheme '", scheme, "' is built in or empty"));
  }
  SchemeTable& table = Schemes();
  MutexLock lock(table.mu);
  if (!table.schemes.emplace(scheme, std::move(handler)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("rendezvous scheme '", scheme, "' is already registered"));
  }
  return absl::OkStatus();
}

bool HasRendezvousScheme(const std::string& scheme) { return FindScheme(scheme).has_value(); }

std::optional<std::string> GetEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<RendezvousResult> Rendezvous(const std::string& init_method, int rank,
                                            int world_size, absl::Duration timeout,
                                            const EnvLookup& env,
                                            const std::optional<std::string>& secret) {
  ASSIGN_OR_RETURN(ParsedUrl url, ParseUrl(init_method));
  if (std::optional<RendezvousScheme> launcher = FindScheme(url.scheme)) {
    return (*launcher)(rank, world_size, timeout);
  }
  RendezvousResult result;
  result.rank = rank;
  result.world_size = world_size;
  RETURN_IF_ERROR(ResolveInt(result.rank, url.rank,
                             {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, env,
                             "rank"));
  RETURN_IF_ERROR(ResolveInt(result.world_size, url.world_size,
                             {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"},
                             env, "world_size"));
  if (result.world_size < 1 || result.rank < 0 || result.rank >= result.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", result.rank, " is outside [0, ", result.world_size, ")"));
  }
  if (url.scheme == "env") {
    ASSIGN_OR_RETURN(StoreAddress where, EnvStoreAddress(env));
    result.store_host = where.host;
    if (std::optional<std::string> prefix = TorchrunAgentStorePrefix(env)) {
      ASSIGN_OR_RETURN(result.store, JoinTorchrunAgentStore(where, *prefix, timeout));
    } else {
      auto store =
          ConnectTcpStore(where.host, where.port, result.rank, result.world_size, timeout, secret);
      if (!store.ok()) {
        return absl::Status(store.status().code(), absl::StrCat("env:// store from ", where.source,
                                                                ": ", store.status().message()));
      }
      result.store = *std::move(store);
    }
  } else if (url.scheme == "tcp") {
    ASSIGN_OR_RETURN(auto host_port, SplitHostPort(url.body, init_method));
    result.store_host = host_port.first;
    ASSIGN_OR_RETURN(result.store, ConnectTcpStore(host_port.first, host_port.second, result.rank,
                                                   result.world_size, timeout, secret));
  } else if (url.scheme == "file") {
    if (url.body.empty() || url.body[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "init_method '", init_method, "' needs an absolute path: file:///path/to/file"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Open(url.body, timeout));
    result.store = std::move(store);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("init_method '", init_method,
                                                   "': unknown scheme '", url.scheme,
                                                   "'; use env://, tcp:// or file:// (or mpi:// "
                                                   "with the mpi backend linked in)"));
  }
  return result;
}

absl::Status StoreBarrier(Store& store, absl::string_view name, int rank, int size,
                          absl::Duration timeout) {
  const std::string arrived_key = absl::StrCat("barrier/", name, "/arrived");
  ASSIGN_OR_RETURN(int64_t arrived, store.Add(arrived_key, 1));
  const int64_t generation = (arrived - 1) / size;
  const std::string done_key = absl::StrCat("barrier/", name, "/done/", generation);
  // Who arrived, so a timeout can name who did not.
  const std::string here_prefix = absl::StrCat("barrier/", name, "/here/", generation, "/");
  RETURN_IF_ERROR(store.Set(absl::StrCat(here_prefix, rank), "1"));
  if (arrived % size == 0) RETURN_IF_ERROR(store.Set(done_key, "1"));
  absl::Status waited = store.Wait({done_key}, timeout);
  if (absl::IsDeadlineExceeded(waited)) {
    auto now = store.Add(arrived_key, 0);
    const int64_t here = now.ok() ? *now - generation * size : -1;
    std::vector<int> missing;
    for (int r = 0; r < size && missing.size() < 32; ++r) {
      auto present = store.Check({absl::StrCat(here_prefix, r)});
      if (present.ok() && !*present) missing.push_back(r);
    }
    // A rank that never arrives may have been refused by the store this rank serves.
    const std::string refused = store.RefusalReport();
    return absl::DeadlineExceededError(absl::StrCat(
        name, ": rank ", rank, " timed out after ", absl::FormatDuration(timeout),
        " waiting for all ", size, " ranks; ", here, "/", size, " arrived",
        missing.empty() ? ""
                        : absl::StrCat("; never arrived: rank(s) ", absl::StrJoin(missing, ", "),
                                       missing.size() == 32 ? ", ..." : ""),
        refused.empty() ? ""
                        : absl::StrCat("; meanwhile this rank's store server ", refused,
                                       " (a rank with another secret, or without TLS?)")));
  }
  return waited;
}

}  // namespace plexus
