// Data-parallel training across processes: every rank holds the whole model,
// reads its shard of the data, and averages gradients with the others.
//
// Two layers:
//   - Communicator: the collectives a run needs, behind an interface. The
//     MPI one (src/distributed/mpi/mpi_communicator.cc, built when CMake finds MPI)
//     runs every MPI call on one communication thread with a watchdog. The
//     local group (src/distributed/local_group.cc) joins the threads of one process,
//     one rank each. The NCCL one (src/distributed/nccl/nccl_communicator.cc)
//     averages GPU gradients on the GPU's stream and broadcasts GPU
//     parameters, and leaves the host collectives (metrics, checksums) to an
//     MPI or local communicator under it: its id is broadcast over MPI
//     (`mpirun ... --dist mpi --gpus N`) or all ranks are made at once in
//     one process (`--gpus 0,1`).
//   - DataParallel: what the trainer does with it. It groups the parameter
//     gradients into buckets in the order backward produces them and pushes
//     one asynchronous all-reduce per bucket to the engine, so each bucket is
//     exchanged while backward computes the ones before it; it broadcasts
//     parameters from rank 0, reduces metrics, and compares parameter
//     checksums across ranks.
//
// Collectives must be issued in the same order on every rank. A
// communicator numbers them when they are requested (on the trainer's
// thread, in program order, the same on every rank) and issues them in that
// order, whatever order the engine runs the functions that request them.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/engine.h"
#include "frugal/tensor.h"
#include "frugal/trace.h"

namespace frugal {

class Executor;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Numbers a collective: call on the trainer's thread, in the same order
  // on every rank. The number is passed to the *Async call that issues it.
  virtual uint64_t Reserve() = 0;
  // Sums n floats in place across ranks, then calls done (from the
  // communicator's thread) with nullptr or the error. data must stay valid
  // until then. last_of_step marks the step's last bucket: from its
  // request (backward is over) to its end, communication is exposed.
  virtual void AllReduceSumAsync(uint64_t seq, float* data, int64_t n, const char* what, bool last_of_step,
                                 std::function<void(std::exception_ptr)> done) = 0;
  // True when gradients and parameters are GPU buffers (NCCL): DataParallel
  // then averages them with AllReduceAverageOnStream, and Broadcast takes
  // device pointers.
  virtual bool device_buffers() const { return false; }
  // device_buffers() only: averages every buffer over the ranks, in place,
  // queued on the stream of `cuda` (backend::LaunchAsync's). Called
  // in the same order on every rank.
  virtual void AllReduceAverageOnStream(const std::vector<std::pair<float*, int64_t>>& bufs, cuda::Context* cuda);
  // Copies root's n floats to every rank's data, then calls done as
  // AllReduceSumAsync does (host buffers only).
  virtual void BroadcastAsync(uint64_t seq, float* data, int64_t n, int root, const char* what,
                              std::function<void(std::exception_ptr)> done);
  // Blocking collectives for the trainer's thread (numbered internally).
  virtual void Broadcast(float* data, int64_t n, int root, const char* what) = 0;
  virtual void AllReduceSum(double* data, int64_t n, const char* what) = 0;
  virtual void AllReduceMin(int64_t* data, int64_t n, const char* what) = 0;
  virtual std::vector<uint64_t> AllGather(uint64_t value, const char* what) = 0;
  // Ends every rank at once, after printing "frugal: error: rank R: message".
  [[noreturn]] virtual void Abort(const std::string& message) = 0;
  // Shuts down cleanly (every rank must call it); the destructor of an
  // unfinished communicator does not.
  virtual void Finish() = 0;
  // One line: all-reduces, bytes, time in flight and time exposed after backward.
  virtual std::string Stats() const = 0;
};

struct CommunicatorOptions {
  // A collective that has not completed after this many seconds ends every
  // rank with an error naming the ranks that did not reach it.
  double timeout_s = 60;
};

// "mpi": the MPI communicator (call before any other MPI user; once per
// process). Throws Error when this frugal was built without MPI, or for an
// unknown name.
std::unique_ptr<Communicator> MakeCommunicator(const std::string& name, const CommunicatorOptions& opts);
// Whether MakeCommunicator("mpi") can work in this build.
bool MpiBuilt();

// n communicators for n threads of this process, rank k for the thread that
// runs rank k. Collectives are exchanges through shared memory: sums in rank
// order, so every rank gets the same bits. AllReduceSumAsync runs on each
// rank's communication thread in sequence order, as MPI's does. Abort ends
// the process.
std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int n);

// NCCL over GPU `device`, one rank per GPU: takes over `host` (the MPI or
// local communicator of this rank) for the host collectives and the rank
// numbering. MakeNcclCommunicator is called by every rank of an MPI run
// (rank 0 makes the NCCL id and broadcasts it over `host`);
// MakeNcclGroup makes the communicators of the GPUs of one process at once
// (hosts[k] for devices[k]). MakeNcclCommunicator never returns on a failure
// (no CUDA or NCCL in this build, a NCCL error): it ends every rank through
// host->Abort, since the others would wait for this one; MakeNcclGroup
// throws Error.
std::unique_ptr<Communicator> MakeNcclCommunicator(std::unique_ptr<Communicator> host, int device);
std::vector<std::unique_ptr<Communicator>> MakeNcclGroup(std::vector<std::unique_ptr<Communicator>> hosts,
                                                         const std::vector<int>& devices);

struct DistOptions {
  Communicator* comm = nullptr;    // null: a single process
  int64_t bucket_bytes = 1 << 20;  // gradients per all-reduce
  int64_t check_every = 0;         // compare parameter checksums every K updates (0: never)
  // --shard optimizer (ZeRO stage 1): each rank holds the optimizer state
  // of its slice of the parameters only (SliceAcrossRanks), updates that
  // slice, and the updated slices are broadcast to every rank.
  bool shard_optimizer = false;
};

// Elements [begin, begin + size) of one tensor, owned by rank `owner`.
struct Slice {
  int owner = 0;
  int64_t begin = 0, size = 0;
};
// The tensors of these sizes laid end to end, cut into one contiguous run
// per rank: rank r owns elements [r * c, (r + 1) * c) of the whole, c =
// ceil(total / ranks) (the last ranks may own less, or nothing). Returns
// each tensor's slices in rank order (an empty tensor has none).
std::vector<std::vector<Slice>> SliceAcrossRanks(const std::vector<int64_t>& sizes, int ranks);

// A tensor whose slices are updated by their owners: after the update,
// every rank's copy is made whole again (DataParallel::PushGather).
struct SlicedTensor {
  Tensor t;
  Var var = -1;  // the tensor's engine variable, written by the gather
  std::vector<Slice> slices;
};

// Metric values averaged over ranks, weighted by each rank's rows.
struct MetricValues {
  std::vector<std::pair<std::string, double>> values;
  int64_t count = 0;  // rows, summed over ranks
  bool Has(const std::string& name) const;
  double Get(const std::string& name) const;
  std::string ToString(const std::string& prefix = "") const;  // as MetricSet::ToString
};

class DataParallel {
 public:
  // grads and grad_vars: the gradient buffers bound to `train` and their
  // engine variables. Buckets follow the order in which train's schedule
  // last writes each gradient. sums: the gradient sums of iter_size > 1
  // (empty otherwise), guarded by the same variables.
  DataParallel(const DistOptions& opts, const Executor& train, const std::map<std::string, Tensor>& grads,
               const std::map<std::string, Var>& grad_vars, const std::map<std::string, Tensor>& sums = {});
  ~DataParallel();
  Communicator* comm() const { return comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  // After train's Push: one asynchronous all-reduce per bucket, each
  // writing the gradients it averages. With of_sums, the same over the
  // gradient sums instead: with iter_size > 1 the micro-batches before the
  // last are summed locally, their sum is averaged while the last one runs
  // forward, and its own gradients as backward produces them (two exchanges
  // per update, not iter_size).
  void PushAllReduce(Engine* engine, bool of_sums = false);
  // After the sharded updates: one asynchronous broadcast per slice, from
  // its owner to every rank, each writing its tensor's variable (so the
  // next forward waits only for the tensors it reads).
  void PushGather(Engine* engine, const std::vector<SlicedTensor>& tensors);
  // Records the exchanges pushed from now on in `trace` (null: stops), each
  // from when the engine ran its function (its gradients or slice were in)
  // to its completion, on the trace's rows "all-reduces" and "broadcasts",
  // beside the executor's ops (Executor::SetTrace): whether communication
  // overlaps backward shows there (`frugal train --profile`).
  void SetTrace(TraceWriter* trace);
  // Puts one tensor's slices together on rank 0: every rank calls it with
  // the tensor's slices and `own`, its own slice's values on the host
  // (undefined where it owns none); rank 0 passes `whole`, a host tensor of
  // the whole size, which gets every slice, the others an undefined tensor.
  // Blocking.
  void GatherToRoot(const std::vector<Slice>& slices, const Tensor& own, const Tensor& whole);
  // Copies rank 0's tensors to every rank (the engine must be idle).
  void Broadcast(std::map<std::string, Tensor>* tensors, const char* what);
  // The smallest value over ranks (the ranks check that they read the same
  // number of samples).
  int64_t Min(int64_t v);
  // Sum over ranks.
  int64_t Sum(int64_t v);
  // This rank's metrics (means over its rows) averaged over the ranks,
  // weighted by rows (perplexity through its log).
  MetricValues Reduce(const MetricValues& local);
  bool CheckDue(int64_t update) const { return check_every_ > 0 && update % check_every_ == 0; }
  // Replaces every tensor by its mean over the ranks (the engine must be
  // idle): the BatchNorm moving statistics, which each rank gathers from its
  // own shard, before they are validated with or checkpointed.
  void AverageAcrossRanks(const std::map<std::string, Tensor>& tensors);
  // Throws Error naming the ranks whose parameters differ from rank 0's.
  void CheckConsistency(const std::map<std::string, Tensor>& params, int64_t update);
  std::string Describe() const;

 private:
  struct Bucket {
    std::vector<std::string> names;
    std::vector<Tensor> grads, sums;
    std::vector<Var> vars;
    std::vector<float> buf;  // host, several gradients: side by side (one is reduced in place)
    std::string what;
  };
  // Device buffers: one asynchronous push per bucket on the GPU's stream,
  // in push order (order_var_), so every rank issues them alike.
  void PushAllReduceOnGpu(Engine* engine, bool of_sums);
  Communicator* comm_;
  TraceWriter* trace_ = nullptr;
  Device device_;  // of the gradients
  Var order_var_ = -1;
  Engine* order_engine_ = nullptr;
  int64_t check_every_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
};

// A checksum of the tensors' bytes (FNV-1a over names and values).
uint64_t Checksum(const std::map<std::string, Tensor>& tensors);

}  // namespace frugal
