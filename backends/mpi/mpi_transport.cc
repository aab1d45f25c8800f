#include "backends/mpi/mpi_transport.h"

#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "executor/collectives.h"

namespace plexus::mpi {
namespace {

// A tag for MPI_Comm_create_group that all members derive alike from the group's name.
int CreationTag(const std::string& name) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  return static_cast<int>(hash & 0x7fff);  // Within the standard's minimum MPI_TAG_UB.
}

// "mpi send of N bytes to rank P in group 'G' (operation O)", for errors.
std::string DescribeMessage(bool is_send, int peer, size_t bytes, const std::string& group,
                            uint64_t operation) {
  std::string what = absl::StrCat("mpi ", is_send ? "send" : "recv", " of ", bytes, " bytes ",
                                  is_send ? "to" : "from");
  if (peer >= 0) {
    absl::StrAppend(&what, " rank ", peer);
  } else {
    absl::StrAppend(&what, " any rank");
  }
  absl::StrAppend(&what, " in group '", group, "' (operation ", operation, ")");
  return what;
}

// The engine's post and finish for one send or receive of `count` bytes at `data`.
void BindMessage(MpiEngine::Operation& op, bool is_send, uint8_t* data, int count, int peer,
                 int mpi_tag, MPI_Comm comm, const WorkPtr& work) {
  if (is_send) {
    op.post = [data, count, peer, mpi_tag, comm](MPI_Request* request) {
      return MPI_Isend(data, count, MPI_BYTE, peer, mpi_tag, comm, request);
    };
    op.finish = [work, count](const MPI_Status&) {
      work->AddBytesSent(count);
      return absl::OkStatus();
    };
    return;
  }
  const int source = peer >= 0 ? peer : MPI_ANY_SOURCE;
  op.post = [data, count, source, mpi_tag, comm](MPI_Request* request) {
    return MPI_Irecv(data, count, MPI_BYTE, source, mpi_tag, comm, request);
  };
  op.finish = [work, count, what = op.what](const MPI_Status& status) {
    int received = 0;
    MPI_Get_count(&status, MPI_BYTE, &received);
    if (received != count) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": matched a message of ", received,
                                                        " bytes from rank ", status.MPI_SOURCE));
    }
    work->SetSourceRank(status.MPI_SOURCE);
    work->AddBytesReceived(count);
    return absl::OkStatus();
  };
}

}  // namespace

absl::StatusOr<std::shared_ptr<MpiGroup>> MpiGroup::Create(MpiEngine* engine, std::string name,
                                                           const std::vector<int>& mpi_ranks,
                                                           int rank, absl::Duration timeout) {
  std::shared_ptr<MpiGroup> group(
      new MpiGroup(engine, std::move(name), rank, static_cast<int>(mpi_ranks.size())));
  MpiGroup* g = group.get();
  absl::Status created = engine->Call(
      [g, &mpi_ranks]() -> absl::Status {
        MPI_Group world = MPI_GROUP_NULL;
        MPI_Group members = MPI_GROUP_NULL;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, static_cast<int>(mpi_ranks.size()), mpi_ranks.data(), &members);
        int rc = MPI_Comm_create_group(MPI_COMM_WORLD, members, CreationTag(g->name_), &g->native_);
        MPI_Group_free(&members);
        MPI_Group_free(&world);
        if (rc != MPI_SUCCESS) {
          return MpiErrorToStatus(rc, absl::StrCat("MPI_Comm_create_group for '", g->name_, "'"));
        }
        for (MPI_Comm* comm : {&g->algorithms_, &g->point_to_point_}) {
          rc = MPI_Comm_dup(g->native_, comm);
          if (rc != MPI_SUCCESS) {
            return MpiErrorToStatus(rc, absl::StrCat("MPI_Comm_dup for '", g->name_, "'"));
          }
        }
        for (MPI_Comm comm : {g->native_, g->algorithms_, g->point_to_point_}) {
          MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        }
        int* upper = nullptr;
        int found = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &upper, &found);
        if (found && upper != nullptr) g->tag_upper_bound_ = *upper;
        int comm_rank = -1;
        MPI_Comm_rank(g->native_, &comm_rank);
        if (comm_rank != g->rank_) {
          return absl::InternalError(absl::StrCat("group '", g->name_, "': MPI placed rank ",
                                                  g->rank_, " at ", comm_rank));
        }
        return absl::OkStatus();
      },
      timeout);
  if (!created.ok()) return created;
  return group;
}

MpiGroup::~MpiGroup() {
  (void)engine_->Call(
      [this] {
        for (MPI_Comm* comm : {&native_, &algorithms_, &point_to_point_}) {
          if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
        }
        return absl::OkStatus();
      },
      absl::Seconds(10));
}

absl::Status MpiGroup::broken() {
  MutexLock lock(mu_);
  return broken_;
}

void MpiGroup::Break(const absl::Status& reason) {
  absl::Status status;
  {
    MutexLock lock(mu_);
    if (broken_.ok()) broken_ = reason;
    status = broken_;
  }
  engine_->Abort(this, 0, status);
}

WorkPtr MpiTransport::Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                           absl::Duration timeout) {
  return Post(true, peer, tag, const_cast<uint8_t*>(data.data()), data.size(), timeout);
}

WorkPtr MpiTransport::Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                           absl::Duration timeout) {
  if (peer < 0) {
    return Work::Finished(absl::InvalidArgumentError(absl::StrCat("recv from rank ", peer)), "recv",
                          size());
  }
  return Post(false, peer, tag, data.data(), data.size(), timeout);
}

WorkPtr MpiTransport::RecvFromAny(MessageTag tag, absl::Span<uint8_t> data,
                                  absl::Duration timeout) {
  return Post(false, -1, tag, data.data(), data.size(), timeout);
}

WorkPtr MpiTransport::Post(bool is_send, int peer, MessageTag tag, uint8_t* data, size_t bytes,
                           absl::Duration timeout) {
  const uint64_t operation = TagOperation(tag.tag);
  const uint64_t step = tag.tag & ((uint64_t{1} << kTagStepBits) - 1);
  const bool point_to_point = operation >= executor::kPointToPointOperationBase;
  // Collectives run one at a time per group, so the operation's low bits tell them apart.
  const uint64_t wide = point_to_point ? operation - executor::kPointToPointOperationBase
                                       : ((operation & 0x7fff) << 16) | (step & 0xffff);
  const int mpi_tag =
      static_cast<int>(wide % (static_cast<uint64_t>(group_->tag_upper_bound()) + 1));
  MPI_Comm comm = point_to_point ? group_->point_to_point() : group_->algorithms();
  const std::string what = DescribeMessage(is_send, peer, bytes, group_->name(), operation);
  auto work = std::make_shared<Work>(is_send ? "send" : "recv", size());
  if (absl::Status broken = group_->broken(); !broken.ok()) {
    work->Complete(broken);
    return work;
  }
  if (bytes > static_cast<size_t>(INT_MAX)) {
    work->Complete(absl::InvalidArgumentError(
        absl::StrCat(what, ": MPI counts are int; messages over 2 GiB are not supported")));
    return work;
  }
  const int count = static_cast<int>(bytes);
  MpiEngine::Operation op;
  op.what = what;
  op.deadline = absl::Now() + timeout;
  op.owner = group_.get();
  op.operation = operation;
  op.cancellable = !is_send;
  op.work = work;
  BindMessage(op, is_send, data, count, peer, mpi_tag, comm, work);
  // One failure leaves MPI holding requests of this group: the whole group breaks.
  op.on_failure = [group = group_](const absl::Status& status) { group->Break(status); };
  group_->engine()->Start(std::move(op));
  return work;
}

void MpiTransport::AbortOperation(uint64_t operation, absl::Status reason) {
  group_->Break(
      absl::Status(reason.code(), absl::StrCat("operation ", operation, ": ", reason.message())));
}

void MpiTransport::Abort(absl::Status reason) { group_->Break(reason); }

}  // namespace plexus::mpi
