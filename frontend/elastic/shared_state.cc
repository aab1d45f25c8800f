#include "frontend/elastic/shared_state.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus::elastic {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t Lane(uint64_t acc, uint64_t word) {
  return Rotl(acc + word * kPrime2, 31) * kPrime1;
}
inline uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

const char* StrategyName(SyncStrategy strategy) {
  switch (strategy) {
    case SyncStrategy::kEnforcePopular:
      return "ENFORCE_POPULAR";
    case SyncStrategy::kReceiveOnly:
      return "RECEIVE_ONLY";
    case SyncStrategy::kSendOnly:
      return "SEND_ONLY";
  }
  return "?";
}

// The most common value (ties: the one `prefer` ranks first).
template <typename T, typename Prefer>
T Mode(const std::vector<T>& values, Prefer prefer) {
  std::map<T, int> counts;
  for (const T& v : values) ++counts[v];
  T best = values.front();
  int best_count = 0;
  for (const auto& [value, count] : counts) {
    if (count > best_count || (count == best_count && prefer(value, best))) {
      best = value;
      best_count = count;
    }
  }
  return best;
}

// Every ballot shares the same tensors (names, counts, dtypes) in the same order.
absl::Status CheckBallotsAgree(const std::vector<SyncBallot>& ballots) {
  const SyncBallot& first = ballots.front();
  const size_t n_tensors = first.tensors.size();
  for (const SyncBallot& b : ballots) {
    if (b.tensors.size() != n_tensors) {
      return absl::FailedPreconditionError(
          absl::StrCat("sync_shared_state: ", first.description, " shares ", n_tensors,
                       " tensors, ", b.description, " shares ", b.tensors.size()));
    }
    for (size_t t = 0; t < n_tensors; ++t) {
      const auto& x = first.tensors[t];
      const auto& y = b.tensors[t];
      if (x.name != y.name || x.count != y.count || x.dtype != y.dtype) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sync_shared_state: tensor ", t, " is '", x.name, "' (", x.count, " x ",
            DTypeName(static_cast<DType>(x.dtype)), ") on ", first.description, " but '", y.name,
            "' (", y.count, " x ", DTypeName(static_cast<DType>(y.dtype)), ") on ", b.description));
      }
    }
  }
  return absl::OkStatus();
}

// Which ballots vote: those of the strongest strategy present (SEND_ONLY over
// ENFORCE_POPULAR), and among them the members holding the group's state when any does.
std::vector<bool> Voters(const std::vector<SyncBallot>& ballots) {
  bool any_send_only = false;
  for (const SyncBallot& b : ballots) any_send_only |= b.strategy == SyncStrategy::kSendOnly;
  const SyncStrategy authority =
      any_send_only ? SyncStrategy::kSendOnly : SyncStrategy::kEnforcePopular;
  bool members_vote = false;  // Whether a member that holds the group's state can vote.
  for (const SyncBallot& b : ballots) {
    members_vote |= b.strategy == authority && b.holds_group_state;
  }
  std::vector<bool> voters;
  for (const SyncBallot& b : ballots) {
    voters.push_back(b.strategy == authority && (b.holds_group_state || !members_vote));
  }
  return voters;
}

// Tensor t of the plan: the voters' popular content at the plan's revision, and for every
// peer that must receive it the holder it receives from.
absl::Status PlanTensor(const std::vector<SyncBallot>& ballots, const std::vector<bool>& voters,
                        size_t t, SyncPlan& plan) {
  std::vector<uint64_t> hashes;
  for (size_t i = 0; i < ballots.size(); ++i) {
    if (voters[i] && ballots[i].revision == plan.revision) {
      hashes.push_back(ballots[i].tensors[t].hash);
    }
  }
  const uint64_t popular = Mode(hashes, [](uint64_t a, uint64_t b) { return a < b; });
  plan.popular_hash[t] = popular;
  std::vector<int64_t> holders;
  for (size_t i = 0; i < ballots.size(); ++i) {
    const SyncBallot& b = ballots[i];
    if (voters[i] && b.revision == plan.revision && b.tensors[t].hash == popular) {
      holders.push_back(b.peer);
    }
  }
  for (size_t i = 0; i < ballots.size(); ++i) {
    const SyncBallot& b = ballots[i];
    const auto& tensor = b.tensors[t];
    if (tensor.hash == popular) continue;
    const bool receive = b.revision != plan.revision || b.strategy == SyncStrategy::kReceiveOnly ||
                         !tensor.allow_content_inequality;
    if (!receive) continue;
    if (b.strategy == SyncStrategy::kSendOnly) {
      return absl::FailedPreconditionError(
          absl::StrCat("sync_shared_state: ", b.description, " asked to ", StrategyName(b.strategy),
                       " but its tensor '", tensor.name, "' at revision ", b.revision,
                       " differs from the popular one at revision ", plan.revision));
    }
    plan.source[t][i] = holders[(i + t) % holders.size()];  // Spreads the sending.
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t ContentHash(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int l = 0; l < 4; ++l)
      lanes[l] = Lane(lanes[l], absl::little_endian::Load64(p + i + 8 * l));
  }
  uint64_t h = Rotl(lanes[0], 1) + Rotl(lanes[1], 7) + Rotl(lanes[2], 12) + Rotl(lanes[3], 18);
  h += static_cast<uint64_t>(bytes) * kPrime3;
  for (; i + 8 <= bytes; i += 8)
    h = Rotl(h ^ Lane(0, absl::little_endian::Load64(p + i)), 27) * kPrime1;
  for (; i < bytes; ++i) h = Rotl(h ^ (p[i] * kPrime3), 11) * kPrime1;
  return Avalanche(h);
}

absl::Status ValidateSharedState(const SharedState& state) {
  if (state.tensors.empty()) {
    return absl::InvalidArgumentError("sync_shared_state: the shared state has no tensors");
  }
  if (state.tensors.size() > kMaxSharedTensors) {
    return absl::InvalidArgumentError(absl::StrCat("sync_shared_state: ", state.tensors.size(),
                                                   " tensors, at most ", kMaxSharedTensors));
  }
  std::set<std::string> names;
  for (const TensorInfo& t : state.tensors) {
    if (t.name.empty() || t.name.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          "sync_shared_state: tensor names must be non-empty and free of NUL bytes");
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sync_shared_state: tensor name '", t.name, "' appears twice"));
    }
    if (t.count < 0 || (t.count > 0 && t.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("sync_shared_state: tensor '", t.name,
                                                     "' has count ", t.count,
                                                     t.data ? "" : " and no buffer"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SyncPlan> PlanSync(const std::vector<SyncBallot>& ballots) {
  if (ballots.empty()) return absl::InternalError("PlanSync without ballots");
  RETURN_IF_ERROR(CheckBallotsAgree(ballots));
  const size_t n_tensors = ballots.front().tensors.size();
  const std::vector<bool> voters = Voters(ballots);
  std::vector<uint64_t> revisions;
  for (size_t i = 0; i < ballots.size(); ++i) {
    if (voters[i]) revisions.push_back(ballots[i].revision);
  }
  if (revisions.empty()) {
    return absl::FailedPreconditionError(
        "sync_shared_state: every peer asked to RECEIVE_ONLY, so nobody holds a state to send");
  }
  SyncPlan plan;
  plan.revision = Mode(revisions, [](uint64_t a, uint64_t b) { return a > b; });
  plan.popular_hash.resize(n_tensors);
  plan.source.assign(n_tensors, std::vector<int64_t>(ballots.size(), -1));
  for (size_t t = 0; t < n_tensors; ++t) {
    RETURN_IF_ERROR(PlanTensor(ballots, voters, t, plan));
  }
  return plan;
}

}  // namespace plexus::elastic
