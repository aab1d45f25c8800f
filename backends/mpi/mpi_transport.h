// MpiGroup: one plexus group's MPI communicators, and MpiTransport, the Transport interface
// over MPI point-to-point calls on them, so that algorithms/ runs on MPI for what MPI lacks
// (reductions of bool, float16 and bfloat16) and send/recv are MPI_Isend/MPI_Irecv.
//
// Three communicators over the same members, in plexus rank order: one for MPI's own
// collectives, one for the algorithms' messages, one for user send/recv - so that their tags
// never meet. Every call goes through the MpiEngine (the one thread that calls MPI).
//
// MPI cannot withdraw a started send or collective, nor tell peers about a local failure, so
// the first failure (deadline, error, abort) breaks the group: pending operations fail with
// that status, later ones are refused - as c10d's MPI and Gloo process groups do.
#ifndef PLEXUS_BACKENDS_MPI_MPI_TRANSPORT_H_
#define PLEXUS_BACKENDS_MPI_MPI_TRANSPORT_H_

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/mpi/mpi_engine.h"
#include "base/core/mutex.h"
#include "base/transport/transport.h"

namespace plexus::mpi {

class MpiGroup {
 public:
  // Builds the communicators for `mpi_ranks` (the MPI_COMM_WORLD rank of each group rank, in
  // group order) with MPI_Comm_create_group: collective over the members only, which must all
  // be calling it (the backend waits for them on the store first).
  static absl::StatusOr<std::shared_ptr<MpiGroup>> Create(MpiEngine* engine, std::string name,
                                                          const std::vector<int>& mpi_ranks,
                                                          int rank, absl::Duration timeout);
  ~MpiGroup();  // Frees the communicators (on the engine thread).

  MpiEngine* engine() const { return engine_; }
  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm native() const { return native_; }
  MPI_Comm algorithms() const { return algorithms_; }
  MPI_Comm point_to_point() const { return point_to_point_; }
  int tag_upper_bound() const { return tag_upper_bound_; }

  // Why the group broke; OK while usable.
  absl::Status broken();
  // Breaks the group with `reason` (the first reason sticks) and fails its pending operations.
  void Break(const absl::Status& reason);

 private:
  MpiGroup(MpiEngine* engine, std::string name, int rank, int size)
      : engine_(engine), name_(std::move(name)), rank_(rank), size_(size) {}

  MpiEngine* const engine_;
  const std::string name_;
  const int rank_;
  const int size_;
  MPI_Comm native_ = MPI_COMM_NULL;
  MPI_Comm algorithms_ = MPI_COMM_NULL;
  MPI_Comm point_to_point_ = MPI_COMM_NULL;
  int tag_upper_bound_ = 32767;  // The standard's guaranteed minimum until MPI says more.
  Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

class MpiTransport : public Transport {
 public:
  explicit MpiTransport(std::shared_ptr<MpiGroup> group) : group_(std::move(group)) {}

  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
               absl::Duration timeout) override;
  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  void AbortOperation(uint64_t operation, absl::Status reason) override;
  void Abort(absl::Status reason) override;

 private:
  // peer < 0 receives from any source.
  WorkPtr Post(bool is_send, int peer, MessageTag tag, uint8_t* data, size_t bytes,
               absl::Duration timeout);

  const std::shared_ptr<MpiGroup> group_;
};

}  // namespace plexus::mpi

#endif  // PLEXUS_BACKENDS_MPI_MPI_TRANSPORT_H_
