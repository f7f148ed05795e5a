// The NCCL communicator (frugal/dist.h): gradients averaged and parameters
// broadcast between GPUs with NCCL, one rank per GPU; the host collectives
// (metrics, checksums, batch counts) and the rank numbering belong to the
// MPI or local communicator it wraps. Without NCCL in the build the
// factories say so.
#include <glog/logging.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_util.h"
#include "frugal/dist.h"

#ifdef FRUGAL_WITH_NCCL
#include <nccl.h>
#endif

namespace frugal {

#ifdef FRUGAL_WITH_NCCL
namespace {

#define FRUGAL_NCCL_CHECK(expr)                                                                                  \
  do {                                                                                                           \
    const ncclResult_t frugal_r = (expr);                                                                        \
    if (frugal_r != ncclSuccess)                                                                                 \
      throw Error(                                                                                               \
          Fmt("NCCL error: ", ncclGetErrorString(frugal_r), " (", #expr, " at ", __FILE__, ":", __LINE__, ")")); \
  } while (0)

class NcclCommunicator : public Communicator {
 public:
  // Takes over a working NCCL communicator and a stream of `device`; throws nothing.
  NcclCommunicator(std::unique_ptr<Communicator> host, int device, ncclComm_t comm, cudaStream_t stream)
      : host_(std::move(host)), device_(device), comm_(comm), stream_(stream) {}
  ~NcclCommunicator() override {
    if (comm_) ncclCommAbort(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  uint64_t Reserve() override { return host_->Reserve(); }
  bool device_buffers() const override { return true; }

  void AllReduceSumAsync(uint64_t, float*, int64_t, const char* what, bool,
                         std::function<void(std::exception_ptr)>) override {
    LOG(FATAL) << what << ": the NCCL communicator averages GPU buffers with AllReduceAverageOnStream";
  }

  void AllReduceAverageOnStream(const std::vector<std::pair<float*, int64_t>>& bufs, cuda::Context* cuda) override {
    cudaStream_t s = cuda->stream;
    FRUGAL_NCCL_CHECK(ncclGroupStart());
    for (const auto& [p, n] : bufs) {
      FRUGAL_NCCL_CHECK(ncclAllReduce(p, p, static_cast<size_t>(n), ncclFloat, ncclAvg, comm_, s));
      bytes_ += n * static_cast<int64_t>(sizeof(float));
    }
    FRUGAL_NCCL_CHECK(ncclGroupEnd());
    ++reduces_;
  }

  // data is on the GPU; the engine is idle (the trainer's thread).
  void Broadcast(float* data, int64_t n, int root, const char*) override {
    FRUGAL_CUDA_CHECK(cudaSetDevice(device_));
    FRUGAL_NCCL_CHECK(ncclBroadcast(data, data, static_cast<size_t>(n), ncclFloat, root, comm_, stream_));
    FRUGAL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void AllReduceSum(double* data, int64_t n, const char* what) override { host_->AllReduceSum(data, n, what); }
  void AllReduceMin(int64_t* data, int64_t n, const char* what) override { host_->AllReduceMin(data, n, what); }
  std::vector<uint64_t> AllGather(uint64_t value, const char* what) override { return host_->AllGather(value, what); }
  [[noreturn]] void Abort(const std::string& message) override {
    host_->Abort(message);
    std::abort();  // not reached: the host communicator ends the process
  }

  void Finish() override {
    cudaSetDevice(device_);
    ncclCommDestroy(comm_);
    comm_ = nullptr;
    host_->Finish();
  }

  std::string Stats() const override {
    return Fmt("dist: ", reduces_.load(), " NCCL all-reduces (grouped per bucket) of ", HumanBytes(bytes_.load()),
               " on cuda(", device_, ")'s stream");
  }

 private:
  std::unique_ptr<Communicator> host_;
  int device_;
  ncclComm_t comm_;
  cudaStream_t stream_;  // broadcasts, outside the engine's stream
  std::atomic<int64_t> reduces_{0}, bytes_{0};
};

cudaStream_t NewStream(int device) {
  cudaStream_t s = nullptr;
  FRUGAL_CUDA_CHECK(cudaSetDevice(device));
  FRUGAL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

}  // namespace

std::unique_ptr<Communicator> MakeNcclCommunicator(std::unique_ptr<Communicator> host, int device) {
  try {
    ncclUniqueId id;
    if (host->rank() == 0) FRUGAL_NCCL_CHECK(ncclGetUniqueId(&id));
    // The id's bytes travel as floats: a broadcast copies them unchanged.
    static_assert(sizeof(id) % sizeof(float) == 0, "ncclUniqueId is a whole number of floats");
    float words[sizeof(id) / sizeof(float)];
    std::memcpy(words, &id, sizeof(id));
    host->Broadcast(words, sizeof(id) / sizeof(float), 0, "broadcast(NCCL id)");
    std::memcpy(&id, words, sizeof(id));
    const cudaStream_t stream = NewStream(device);
    ncclComm_t comm = nullptr;
    FRUGAL_NCCL_CHECK(ncclCommInitRank(&comm, host->size(), id, host->rank()));
    return std::make_unique<NcclCommunicator>(std::move(host), device, comm, stream);
  } catch (const Error& e) {
    host->Abort(e.what());  // the other ranks would wait for this one
  }
  std::abort();  // not reached: Abort ends the process
}

std::vector<std::unique_ptr<Communicator>> MakeNcclGroup(std::vector<std::unique_ptr<Communicator>> hosts,
                                                         const std::vector<int>& devices) {
  CHECK_EQ(hosts.size(), devices.size());
  std::vector<ncclComm_t> comms(devices.size());
  FRUGAL_NCCL_CHECK(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t k = 0; k < devices.size(); ++k)
    out.push_back(std::make_unique<NcclCommunicator>(std::move(hosts[k]), devices[k], comms[k], NewStream(devices[k])));
  return out;
}

#else

namespace {
constexpr const char* kNoNccl =
    "data-parallel training on GPUs: this frugal was built with CUDA but without NCCL (install NCCL (nccl.h, "
    "libnccl) where CMake finds it and reconfigure)";
}  // namespace

std::unique_ptr<Communicator> MakeNcclCommunicator(std::unique_ptr<Communicator> host, int) {
  host->Abort(kNoNccl);
  std::abort();  // not reached
}
std::vector<std::unique_ptr<Communicator>> MakeNcclGroup(std::vector<std::unique_ptr<Communicator>>,
                                                         const std::vector<int>&) {
  throw Error(kNoNccl);
}

#endif

}  // namespace frugal
