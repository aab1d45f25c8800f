// Reconfigurable membership (frontend/dispatch/reconfigure.h, what torch's reconfigure runs on)
// with forked processes on each CPU backend: requests that cannot form are refused with their
// reason and use nothing up; members take ranks by position or by sorted handle; a member that
// never comes is named and the rest form without it; after a SIGKILL mid-collective the
// survivors form again under a fresh uuid, and a replacement process started afterwards joins
// by its handle and receives the state by broadcast; a member frozen mid-collective and resumed
// after the others moved on is left out.
#include "frontend/dispatch/reconfigure.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"
#include "base/store/file_store.h"
#include "gtest/gtest.h"
#include "tests/fault/forked_ranks.h"

namespace plexus {
namespace {

using testing::ForkRanks;
using testing::Outcome;

constexpr absl::Duration kTimeout = absl::Seconds(30);
// The operation timeout of the collectives a member is killed during.
constexpr absl::Duration kLoopTimeout = absl::Seconds(5);

std::string StorePath(const std::string& name) {
  static std::atomic<int> next{0};
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name, "-", next++);
}

// A process that may become a member: the store every member shares and its Reconfigurer.
struct Member {
  std::shared_ptr<Store> store;
  std::unique_ptr<Reconfigurer> self;
};
absl::StatusOr<Member> OpenMember(const std::string& path, const std::string& backend) {
  Member member;
  ASSIGN_OR_RETURN(member.store, FileStore::Open(path, kTimeout));
  Reconfigurer::Options options;
  options.store = member.store;
  options.backend = backend;
  options.timeout = kTimeout;
  member.self = std::make_unique<Reconfigurer>(std::move(options));
  return member;
}

absl::Status Wait(absl::StatusOr<WorkPtr> work) {
  if (!work.ok()) return work.status();
  return (*work)->Wait(kTimeout);
}

absl::Status Expect(bool holds, absl::string_view what) {
  return holds ? absl::OkStatus() : absl::InternalError(what);
}

// The request fails with `code` and a message holding `words`; anything else is the error.
absl::Status ExpectRefused(absl::StatusOr<std::shared_ptr<ProcessGroup>> formed,
                           absl::StatusCode code, absl::string_view words) {
  if (formed.status().code() == code && absl::StrContains(formed.status().message(), words)) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("expected ", absl::StatusCodeToString(code), " saying '",
                                          words, "', got ", formed.status().ToString()));
}

// Every member adds rank + 1: the group's size and ranks are what the caller expects.
absl::Status CheckSum(ProcessGroup& group) {
  const int n = group.size();
  std::vector<double> x(1000, group.rank() + 1.0);
  RETURN_IF_ERROR(Wait(group.AllReduce(Tensor::Flat(x.data(), DType::kFloat64, x.size()))));
  return Expect(x.front() == n * (n + 1) / 2.0 && x.back() == x.front(),
                absl::StrCat("all_reduce on rank ", group.rank(), " of ", n, " gave ", x.front()));
}

// Publishes this process's handle as `handle/<id>` and reads those of `ids`, in that order.
absl::StatusOr<std::vector<std::string>> ExchangeHandles(Store& store, const Reconfigurer& self,
                                                         int id, const std::vector<int>& ids) {
  RETURN_IF_ERROR(store.Set(absl::StrCat("handle/", id), self.handle()));
  std::vector<std::string> handles;
  for (int other : ids) {
    ASSIGN_OR_RETURN(std::string handle, store.Get(absl::StrCat("handle/", other)));
    handles.push_back(std::move(handle));
  }
  return handles;
}

void ExpectAllOk(const std::vector<Outcome>& outcomes) {
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].code, absl::StatusCode::kOk)
        << "process " << i << ": " << outcomes[i].message;
  }
}

class ReconfigureTest : public ::testing::TestWithParam<std::string> {};

// In one process: each malformed request is refused naming what is wrong, and the uuid it
// named is still free afterwards; a uuid formed once is refused again, by this process and by
// another process that names a different membership under it.
TEST_P(ReconfigureTest, RequestsThatCannotFormAreRefusedWithTheirReason) {
  const std::string path = StorePath("refused");
  auto ranks = ForkRanks(1, [&](int) -> absl::Status {
    ASSIGN_OR_RETURN(Member one, OpenMember(path, GetParam()));
    ASSIGN_OR_RETURN(Member another, OpenMember(path, GetParam()));  // As another process.
    Reconfigurer& self = *one.self;
    Reconfigurer& other = *another.self;
    RETURN_IF_ERROR(Expect(self.handle() != other.handle(), "two reconfigurers share a handle"));
    const auto code = absl::StatusCode::kInvalidArgument;
    RETURN_IF_ERROR(ExpectRefused(self.Reconfigure({1, {}}), code, "no handles"));
    RETURN_IF_ERROR(ExpectRefused(self.Reconfigure({1, {"node-3:29500"}}), code,
                                  "handle 0 'node-3:29500' is not a plexus handle"));
    RETURN_IF_ERROR(ExpectRefused(self.Reconfigure({1, {self.handle(), self.handle()}}), code,
                                  "is given twice (positions 0 and 1)"));
    RETURN_IF_ERROR(
        ExpectRefused(self.Reconfigure({1, {other.handle()}}), code, "is not among the 1 handles"));

    ASSIGN_OR_RETURN(auto group, self.Reconfigure({1, {self.handle()}}));
    RETURN_IF_ERROR(Expect(group->size() == 1 && group->rank() == 0, "a group of one"));
    RETURN_IF_ERROR(CheckSum(*group));
    const auto used = absl::StatusCode::kFailedPrecondition;
    RETURN_IF_ERROR(ExpectRefused(self.Reconfigure({1, {self.handle()}}), used,
                                  "uuid 1 was already used by this process"));
    RETURN_IF_ERROR(ExpectRefused(other.Reconfigure({1, {other.handle()}}), used,
                                  "uuid 1 was already used for another membership"));
    ASSIGN_OR_RETURN(auto again, other.Reconfigure({2, {other.handle()}}));
    return CheckSum(*again);
  });
  ExpectAllOk(testing::CollectOutcomes(ranks.fds));
  testing::ReapRanks(ranks);
}

// Three processes: a list gives ranks by position (here reversed), a set lets plexus choose
// (sorted handles), each the same on every member.
TEST_P(ReconfigureTest, MembersTakeRanksByPositionOrBySortedHandle) {
  const std::string path = StorePath("ranks");
  auto ranks = ForkRanks(3, [&](int id) -> absl::Status {
    ASSIGN_OR_RETURN(Member member, OpenMember(path, GetParam()));
    Reconfigurer& self = *member.self;
    ASSIGN_OR_RETURN(auto handles, ExchangeHandles(*member.store, self, id, {2, 1, 0}));
    ASSIGN_OR_RETURN(auto by_position, self.Reconfigure({1, handles}));
    RETURN_IF_ERROR(Expect(by_position->rank() == 2 - id && by_position->size() == 3,
                           absl::StrCat("process ", id, " got rank ", by_position->rank())));
    RETURN_IF_ERROR(CheckSum(*by_position));
    RETURN_IF_ERROR(Wait(by_position->Barrier()));

    Reconfigurer::Request chosen{2, handles};
    chosen.ordered = false;
    ASSIGN_OR_RETURN(auto by_plexus, self.Reconfigure(chosen));
    std::sort(handles.begin(), handles.end());
    const int sorted_rank = static_cast<int>(
        std::find(handles.begin(), handles.end(), self.handle()) - handles.begin());
    RETURN_IF_ERROR(Expect(by_plexus->rank() == sorted_rank,
                           absl::StrCat("process ", id, " got rank ", by_plexus->rank(),
                                        ", its handle sorts at ", sorted_rank)));
    RETURN_IF_ERROR(CheckSum(*by_plexus));
    return Wait(by_plexus->Barrier());
  });
  ExpectAllOk(testing::CollectOutcomes(ranks.fds));
  testing::ReapRanks(ranks);
}

// Two processes name a third that never calls: both fail within the forming timeout with
// DeadlineExceeded naming its rank and handle, then form without it under a fresh uuid.
TEST_P(ReconfigureTest, AMemberThatNeverComesIsNamedAndTheRestFormWithoutIt) {
  const std::string path = StorePath("absent");
  auto absent = OpenMember(path, GetParam());  // Its process never reconfigures.
  ASSERT_TRUE(absent.ok()) << absent.status();
  const std::string absent_handle = absent->self->handle();
  auto ranks = ForkRanks(2, [&](int id) -> absl::Status {
    ASSIGN_OR_RETURN(Member member, OpenMember(path, GetParam()));
    Reconfigurer& self = *member.self;
    ASSIGN_OR_RETURN(auto handles, ExchangeHandles(*member.store, self, id, {0, 1}));
    Reconfigurer::Request request{1, {handles[0], handles[1], absent_handle}};
    request.timeout = absl::Seconds(2);
    const absl::Time start = absl::Now();
    auto formed = self.Reconfigure(request);
    const absl::Duration took = absl::Now() - start;
    RETURN_IF_ERROR(ExpectRefused(formed, absl::StatusCode::kDeadlineExceeded,
                                  absl::StrCat("2=", absent_handle)));
    RETURN_IF_ERROR(Expect(absl::StrContains(formed.status().message(), "rank(s) 2"),
                           absl::StrCat("does not name rank 2: ", formed.status().message())));
    RETURN_IF_ERROR(Expect(took < absl::Seconds(10),
                           absl::StrCat("refused after ", absl::FormatDuration(took))));
    ASSIGN_OR_RETURN(auto group, self.Reconfigure({2, handles}));
    RETURN_IF_ERROR(CheckSum(*group));
    return Wait(group->Barrier());
  });
  ExpectAllOk(testing::CollectOutcomes(ranks.fds));
  testing::ReapRanks(ranks);
}

// The survivors' state reaches every member from rank 0 (a newcomer holds zeros), then every
// member adds rank + 1.
absl::Status ShareStateAndCheck(ProcessGroup& group, bool newcomer) {
  std::vector<double> state(256, newcomer ? 0.0 : 3.25);
  RETURN_IF_ERROR(Wait(group.Broadcast(Tensor::Flat(state.data(), DType::kFloat64, state.size()))));
  RETURN_IF_ERROR(
      Expect(std::all_of(state.begin(), state.end(), [](double v) { return v == 3.25; }),
             absl::StrCat("rank ", group.rank(), " did not receive the state")));
  RETURN_IF_ERROR(CheckSum(group));
  return Wait(group.Barrier());
}

// A member of three: forms uuid 1 from the handles on the store, then all-reduces until one
// fails, writing a byte to `ready_fd` once the first has succeeded (so a signal the parent
// sends after three bytes lands mid-collective). Each one that succeeds must hold the whole sum.
struct Looped {
  std::vector<std::string> handles;  // Of ids 0, 1, 2.
  std::shared_ptr<ProcessGroup> group;
  absl::Status failure;
};
absl::StatusOr<Looped> LoopUntilAnAllReduceFails(Reconfigurer& self, Store& store, int id,
                                                 int ready_fd) {
  Looped looped;
  ASSIGN_OR_RETURN(looped.handles, ExchangeHandles(store, self, id, {0, 1, 2}));
  ASSIGN_OR_RETURN(looped.group, self.Reconfigure({1, looped.handles}));
  std::vector<float> data(1 << 16, 1.0f);
  AllReduceOptions options;
  options.timeout = kLoopTimeout;
  for (int step = 0; looped.failure.ok(); ++step) {
    if (step == 1) {
      [[maybe_unused]] ssize_t n = write(ready_fd, "r", 1);
      close(ready_fd);
    }
    std::fill(data.begin(), data.end(), 1.0f);
    looped.failure = Wait(
        looped.group->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()), options));
    // One that completes holds every member's part: no sum of some of them.
    const bool whole = std::all_of(data.begin(), data.end(), [](float v) { return v == 3.0f; });
    if (looped.failure.ok() && !whole) {
      return absl::DataLossError(
          absl::StrCat("member ", id, ": all_reduce ", step, " completed with a partial sum"));
    }
  }
  return looped;
}

// In the parent: true once each of `count` members wrote its byte.
bool AllReady(int fd, int count) {
  char byte;
  int ready = 0;
  while (ready < count && read(fd, &byte, 1) == 1) ++ready;
  close(fd);
  return ready == count;
}

// Forks the three members: each runs LoopUntilAnAllReduceFails, then `then`. Returns once
// each has finished one all_reduce (`*all_ready` false when one failed before).
using AfterLoop =
    std::function<absl::Status(int id, Reconfigurer& self, Store& store, Looped& looped)>;
testing::ForkedRanks ForkLoopingMembers(const std::string& path, const std::string& backend,
                                        bool* all_ready, const AfterLoop& then) {
  int ready[2];
  if (pipe(ready) != 0) abort();
  testing::ForkedRanks members = ForkRanks(3, [&](int id) -> absl::Status {
    close(ready[0]);
    ASSIGN_OR_RETURN(Member member, OpenMember(path, backend));
    ASSIGN_OR_RETURN(Looped looped,
                     LoopUntilAnAllReduceFails(*member.self, *member.store, id, ready[1]));
    return then(id, *member.self, *member.store, looped);
  });
  close(ready[1]);
  *all_ready = AllReady(ready[0], 3);
  return members;
}

// The parent SIGKILLs the third member mid-collective. The survivors abort the broken group and
// form again without it under a fresh uuid; a process forked after the kill joins by its handle
// and receives the survivors' state by broadcast.
TEST_P(ReconfigureTest, SurvivorsOfASigkillFormAgainAndAReplacementJoins) {
  const std::string path = StorePath("kill");
  bool all_ready = false;
  auto members = ForkLoopingMembers(
      path, GetParam(), &all_ready,
      [&](int, Reconfigurer& self, Store& store, Looped& looped) -> absl::Status {
        // tcp fails every member's collective together. On gloo one survivor may wait for the
        // operation's timeout inside a send that never completes while the other failed at once.
        RETURN_IF_ERROR(
            Expect(GetParam() != "cpu:tcp" || !absl::IsDeadlineExceeded(looped.failure),
                   absl::StrCat("the lost member went unnoticed: ", looped.failure.ToString())));
        (void)looped.group->Abort("reconfiguring without the lost member");
        const std::vector<std::string>& handles = looped.handles;
        ASSIGN_OR_RETURN(auto survivors, self.Reconfigure({2, {handles[0], handles[1]}}));
        RETURN_IF_ERROR(CheckSum(*survivors));
        ASSIGN_OR_RETURN(std::string newcomer, store.Get("handle/3"));
        ASSIGN_OR_RETURN(auto grown, self.Reconfigure({3, {handles[0], handles[1], newcomer}}));
        return ShareStateAndCheck(*grown, /*newcomer=*/false);
      });
  ASSERT_TRUE(all_ready);
  kill(members.pids[2], SIGKILL);

  auto replacement = ForkRanks(1, [&](int) -> absl::Status {
    ASSIGN_OR_RETURN(Member member, OpenMember(path, GetParam()));
    ASSIGN_OR_RETURN(auto handles, ExchangeHandles(*member.store, *member.self, 3, {0, 1, 3}));
    ASSIGN_OR_RETURN(auto group, member.self->Reconfigure({3, handles}));
    RETURN_IF_ERROR(Expect(group->rank() == 2, "the replacement is not rank 2"));
    return ShareStateAndCheck(*group, /*newcomer=*/true);
  });
  const std::vector<Outcome> outcomes = testing::CollectOutcomes(members.fds);
  ExpectAllOk(testing::CollectOutcomes(replacement.fds));
  testing::ReapRanks(members);
  testing::ReapRanks(replacement);
  for (int id : {0, 1}) {
    EXPECT_EQ(outcomes[id].code, absl::StatusCode::kOk)
        << "member " << id << ": " << outcomes[id].message;
  }
}

// The parent SIGSTOPs the third member mid-collective; the survivors' all_reduce fails (by the
// 5 s operation timeout at the latest), they form uuid 2 without it, and only then is it
// resumed. The resumed member's all_reduces fail rather than complete with part of a sum,
// and it cannot take part in uuid 2 (claimed for another membership); the survivors' group is
// undisturbed.
TEST_P(ReconfigureTest, AFrozenMemberResumedAfterTheOthersMovedOnIsLeftOut) {
  const std::string path = StorePath("stop");
  bool all_ready = false;
  auto members = ForkLoopingMembers(
      path, GetParam(), &all_ready,
      [&](int id, Reconfigurer& self, Store& store, Looped& looped) -> absl::Status {
        const std::vector<std::string>& handles = looped.handles;
        (void)looped.group->Abort("reconfiguring without the silent member");
        if (id == 2) {  // Resumed: the others are in uuid 2 already.
          RETURN_IF_ERROR(ExpectRefused(self.Reconfigure({2, handles}),
                                        absl::StatusCode::kFailedPrecondition,
                                        "was already used for another membership"));
          return store.Set("resumed_and_refused", "1");
        }
        ASSIGN_OR_RETURN(auto survivors, self.Reconfigure({2, {handles[0], handles[1]}}));
        RETURN_IF_ERROR(store.Set(absl::StrCat("moved_on/", id), "1"));
        RETURN_IF_ERROR(store.Wait({"resumed_and_refused"}, kTimeout));
        RETURN_IF_ERROR(CheckSum(*survivors));
        return Wait(survivors->Barrier());
      });
  ASSERT_TRUE(all_ready);
  kill(members.pids[2], SIGSTOP);
  auto store = FileStore::Open(path, kTimeout);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->Wait({"moved_on/0", "moved_on/1"}, kTimeout).ok());
  kill(members.pids[2], SIGCONT);
  ExpectAllOk(testing::CollectOutcomes(members.fds));
  testing::ReapRanks(members);
}

INSTANTIATE_TEST_SUITE_P(Backends, ReconfigureTest, ::testing::Values("cpu:tcp", "cpu:gloo"),
                         [](const auto& info) { return testing::BackendTestName(info.param); });

}  // namespace
}  // namespace plexus
