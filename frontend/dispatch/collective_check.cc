#include "frontend/dispatch/collective_check.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/core/environment.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

// A stable code for an op name (names are compared, so any fixed mapping will do).
int64_t OpCode(absl::string_view op) {
  int64_t code = 0;
  for (char c : op) code = code * 131 + static_cast<unsigned char>(c);
  return code;
}

// One rank's description in words. The op name travels as a code: ours is printed when theirs
// matches it.
std::string Describe(const int64_t* fields, absl::string_view mine_op, int64_t mine_code) {
  std::string op = fields[1] == mine_code
                       ? std::string(mine_op)
                       : absl::StrCat("a different collective (code ", fields[1], ")");
  std::string text = absl::StrCat("#", fields[0], " ", op, " ");
  const int64_t dtype = fields[2];
  text += dtype >= 0 && dtype < static_cast<int64_t>(std::size(kAllDTypes))
              ? std::string(DTypeName(static_cast<DType>(dtype)))
              : absl::StrCat("dtype ", dtype);
  if (fields[3] >= 0) absl::StrAppend(&text, " x", fields[3]);
  if (fields[4] >= 0) absl::StrAppend(&text, " root ", fields[4]);
  if (fields[5] >= 0 && fields[5] < static_cast<int64_t>(std::size(kAllReduceOpKinds))) {
    absl::StrAppend(&text, " ", ReduceOpName(static_cast<ReduceOpKind>(fields[5])));
  }
  return text;
}

}  // namespace

CollectiveCheck::CollectiveCheck(std::shared_ptr<Backend> host_backend,
                                 std::shared_ptr<Store> store, int rank, int size,
                                 absl::Duration timeout)
    : host_backend_(std::move(host_backend)),
      store_(std::move(store)),
      rank_(rank),
      size_(size),
      timeout_(timeout) {}

bool CollectiveCheck::EnabledByEnvironment() {
  return EnvironmentFlagOrDefault("PLEXUS_CHECK_COLLECTIVES");
}

absl::Status CollectiveCheck::Verify(const CollectiveDescription& mine) {
  MutexLock lock(mu_);
  const int64_t number = checks_++;
  const int64_t code = OpCode(mine.op);
  const int64_t fields[kFields] = {number,     code,      static_cast<int64_t>(mine.dtype),
                                   mine.count, mine.root, mine.reduce_op};
  std::vector<int64_t> all(static_cast<size_t>(kFields) * size_);
  if (host_backend_ != nullptr) {
    Tensor input = Tensor::Flat(const_cast<int64_t*>(fields), DType::kInt64, kFields);
    Tensor output = Tensor::Flat(all.data(), DType::kInt64, all.size());
    Collective gather =
        Collective::Of(CollectiveKind::kAllGatherIntoTensor, {&output, 1}, {&input, 1});
    gather.timeout = timeout_;
    WorkPtr work = host_backend_->Run(gather);
    absl::Status status = work->Wait(timeout_ + absl::Seconds(1));
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(mine.op, " on rank ", rank_,
                                       ": checking that ranks agree: ", status.message()));
    }
  } else {
    const std::string prefix = absl::StrCat("check.", number, ".");
    RETURN_IF_ERROR(
        store_->Set(absl::StrCat(prefix, rank_), absl::StrJoin(fields, fields + kFields, ",")));
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(absl::StrCat(prefix, r));
    RETURN_IF_ERROR(store_->Wait(keys, timeout_));
    ASSIGN_OR_RETURN(std::vector<std::string> values, store_->MultiGet(keys));
    for (int r = 0; r < size_; ++r) {
      std::vector<std::string> parts = absl::StrSplit(values[r], ',');
      for (int f = 0; f < kFields && f < static_cast<int>(parts.size()); ++f) {
        (void)absl::SimpleAtoi(parts[f], &all[r * kFields + f]);
      }
    }
    // Everyone has read every value once each rank has read: the last reader cleans up.
    ASSIGN_OR_RETURN(int64_t readers, store_->Add(absl::StrCat(prefix, "read"), 1));
    if (readers == size_) {
      for (const std::string& key : keys) (void)store_->DeleteKey(key);
      (void)store_->DeleteKey(absl::StrCat(prefix, "read"));
    }
  }
  std::vector<std::string> differing;
  for (int r = 0; r < size_; ++r) {
    if (std::memcmp(&all[r * kFields], fields, sizeof(fields)) != 0) {
      differing.push_back(
          absl::StrCat("rank ", r, " runs ", Describe(&all[r * kFields], mine.op, code)));
    }
  }
  if (differing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(mine.op, " on rank ", rank_,
                   ": ranks disagree about the collective, nothing was launched: "
                   "this rank runs ",
                   Describe(fields, mine.op, code), "; ", absl::StrJoin(differing, "; ")));
}

}  // namespace plexus
