// The CUDA implementation of backend/device.h: device discovery, the arena
// and pool allocators, pinned host memory, copies, and one stream per GPU
// with a completion thread that turns CUDA events into engine completions.
#include <dlfcn.h>
#include <glog/logging.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <thread>

#include "backend/cuda/cuda_util.h"
#include "backend/device.h"

namespace frugal {
namespace cuda {

void ThrowCuda(const char* expr, const char* file, int line, const char* message) {
  throw Error(Fmt("CUDA error: ", message, " (", expr, " at ", file, ":", line, ")"));
}

#define FRUGAL_CUBLAS_SYMBOL2(name) #name
#define FRUGAL_CUBLAS_SYMBOL(name) FRUGAL_CUBLAS_SYMBOL2(name)  // expands cublasCreate to "cublasCreate_v2"

const CublasApi& Cublas() {
  static std::mutex mu;
  static std::optional<CublasApi> api;
  std::lock_guard<std::mutex> lock(mu);
  if (api) return *api;
  const std::string lib = Fmt("libcublas.so.", CUBLAS_VER_MAJOR);
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error(Fmt("cannot open ", lib, " (", dlerror(), "): install cuBLAS ", CUBLAS_VER_MAJOR,
                    " or put its folder in LD_LIBRARY_PATH"));
  auto get = [&](const char* name, auto* fn) {
    void* p = dlsym(h, name);
    if (!p) throw Error(Fmt(lib, " has no ", name, ": a cuBLAS other than version ", CUBLAS_VER_MAJOR, "?"));
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
  };
  CublasApi a;
  get(FRUGAL_CUBLAS_SYMBOL(cublasCreate), &a.create);
  get(FRUGAL_CUBLAS_SYMBOL(cublasSetStream), &a.set_stream);
  get(FRUGAL_CUBLAS_SYMBOL(cublasSgemmStridedBatched), &a.sgemm_strided_batched);
  get(FRUGAL_CUBLAS_SYMBOL(cublasGetStatusString), &a.status_string);
  api = a;
  return *api;
}

// The CPU kernels' messages (src/ops/softmax_cross_entropy.cc, embedding.cc);
// the engine prefixes the node's name.
std::string FaultMessage(const Fault& f) {
  if (f.code == kBadLabel) {
    return Fmt("label ", f.value, " of sample ", f.position, " is not a class index in [0, ", f.limit,
               ") (found on the GPU; set ignore_label to skip such rows)");
  }
  return Fmt("index ", f.value, " at position ", f.position, " is not a row of the weight (whole numbers in [0, ",
             f.limit, "); is input_dim large enough?) (found on the GPU)");
}

namespace {

// Pool sizes: small requests round up to a power of two (at least 512 B),
// large ones to a whole MiB, so that freed blocks fit later requests.
size_t PoolSize(int64_t bytes) {
  constexpr size_t kMiB = 1 << 20;
  size_t n = static_cast<size_t>(bytes < 512 ? 512 : bytes);
  if (n >= kMiB) return (n + kMiB - 1) / kMiB * kMiB;
  size_t p = 512;
  while (p < n) p <<= 1;
  return p;
}

// One GPU: its context (stream, handles), its pool, and the completion
// thread that waits for events in launch order.
class Device {
 public:
  explicit Device(int id) : id_(id) {
    FRUGAL_CUDA_CHECK(cudaSetDevice(id));
    FRUGAL_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    ctx_.device = id;
    FRUGAL_CUBLAS_CHECK(Cublas().create(&ctx_.cublas));
    FRUGAL_CUBLAS_CHECK(Cublas().set_stream(ctx_.cublas, ctx_.stream));
    FRUGAL_CUDNN_CHECK(cudnnCreate(&ctx_.cudnn));
    FRUGAL_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    FRUGAL_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&fault_), sizeof(Fault), cudaHostAllocMapped));
    std::memset(fault_, 0, sizeof(Fault));
    FRUGAL_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ctx_.fault), fault_, 0));
    completer_ = std::thread([this] { CompleteLoop(); });
  }
  // Never destroyed (see Get): the CUDA runtime may be gone at exit.

  Context* context() { return &ctx_; }

  void* Alloc(int64_t bytes, bool is_arena) {
    FRUGAL_CUDA_CHECK(cudaSetDevice(id_));
    if (!is_arena) {
      std::lock_guard<std::mutex> pool_lock(pool_mu_);
      auto& bin = free_[PoolSize(bytes)];
      if (!bin.empty()) {
        void* p = bin.back();
        bin.pop_back();
        return p;
      }
    }
    const size_t size = is_arena ? static_cast<size_t>(bytes) : PoolSize(bytes);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      size_t free_bytes = 0, total = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free_bytes, &total);
      throw Error(Fmt("out of device memory on cuda(", id_, ") allocating ", HumanBytes(bytes),
                      is_arena ? " (the arena of the memory plan)" : "", ": ", HumanBytes(free_bytes), " free of ",
                      HumanBytes(total), "; try a smaller batch or a memory strategy that recomputes (--memory sqrt)"));
    }
    if (!is_arena) {
      std::lock_guard<std::mutex> pool_lock(pool_mu_);
      reserved_ += size;
    }
    return p;
  }

  void Free(void* p, int64_t bytes, bool is_arena) {
    if (is_arena) {
      cudaSetDevice(id_);
      Synchronize();  // the arena may still be in use by queued kernels
      cudaFree(p);
      return;
    }
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    free_[PoolSize(bytes)].push_back(p);
  }

  int64_t reserved() {
    std::lock_guard<std::mutex> pool_lock(pool_mu_);
    return reserved_;
  }

  void Launch(const std::function<void(cuda::Context*)>& launch, backend::Completion done) {
    std::exception_ptr error;
    cudaEvent_t event = nullptr;
    const uint64_t number = ++ctx_.launch;  // launches come from this GPU's one engine worker
    try {
      FRUGAL_CUDA_CHECK(cudaSetDevice(id_));
      launch(&ctx_);
      FRUGAL_CUDA_LAUNCHED();
      FRUGAL_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      FRUGAL_CUDA_CHECK(cudaEventRecord(event, ctx_.stream));
    } catch (...) { error = std::current_exception(); }
    std::lock_guard<std::mutex> queue_lock(queue_mu_);
    pending_.push_back({event, error, std::move(done), number});
    queue_cv_.notify_one();
  }

  void Synchronize() { FRUGAL_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

 private:
  struct Pending {
    cudaEvent_t event;
    std::exception_ptr error;
    backend::Completion done;
    uint64_t launch = 0;
  };

  // Completes launches in order: waits for each one's event, then calls its
  // done (which may push further work: it never runs CUDA calls itself).
  void CompleteLoop() {
    cudaSetDevice(id_);
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> queue_lock(queue_mu_);
        queue_cv_.wait(queue_lock, [this] { return !pending_.empty(); });
        p = std::move(pending_.front());
        pending_.pop_front();
      }
      if (p.event) {
        const cudaError_t e = cudaEventSynchronize(p.event);
        cudaEventDestroy(p.event);
        if (e != cudaSuccess && !p.error) {
          p.error = std::make_exception_ptr(Error(Fmt("CUDA error on cuda(", id_, "): ", cudaGetErrorString(e))));
        }
      }
      // A fault of this launch (its kernels are done): fail it, clear the slot.
      const volatile Fault* f = fault_;
      if (f->code > 0 && f->launch == p.launch) {
        if (!p.error) p.error = std::make_exception_ptr(Error(FaultMessage(const_cast<const Fault&>(*fault_))));
        fault_->code = kNoFault;
      }
      p.done(p.error);
    }
  }

  int id_;
  Context ctx_;
  Fault* fault_ = nullptr;  // host side of ctx_.fault
  std::mutex pool_mu_;
  std::map<size_t, std::vector<void*>> free_;
  int64_t reserved_ = 0;
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> pending_;
  std::thread completer_;
};

Device& Get(int id) {
  static std::mutex mu;
  static auto* devices = new std::map<int, std::unique_ptr<Device>>();  // never destroyed
  std::lock_guard<std::mutex> devices_lock(mu);
  auto& d = (*devices)[id];
  if (!d) {
    backend::RequireCudaDevice(id, "CUDA backend");
    d = std::make_unique<Device>(id);
  }
  return *d;
}

}  // namespace
}  // namespace cuda

namespace backend {

bool BuiltWithCuda() { return true; }

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string NoCudaReason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Fmt("no CUDA device (", cudaGetErrorString(e), ")");
  }
  return n == 0 ? "no CUDA device" : "";
}

void RequireCudaDevice(int id, const std::string& what) {
  const int n = CudaDeviceCount();
  if (n == 0) throw Error(Fmt(what, ": ", NoCudaReason(), "; run on the CPU (leave out --gpus)"));
  FRUGAL_REQUIRE(id >= 0 && id < n, what, ": there is no cuda(", id, "): this machine has ", n,
                 " CUDA device(s), numbered 0 to ", n - 1);
}

void* DeviceAlloc(int dev, int64_t bytes, bool is_arena) { return cuda::Get(dev).Alloc(bytes, is_arena); }
void DeviceFree(int dev, void* p, int64_t bytes, bool is_arena) {
  if (p) cuda::Get(dev).Free(p, bytes, is_arena);
}
int64_t PoolReservedBytes(int dev) { return CudaDeviceCount() > dev ? cuda::Get(dev).reserved() : 0; }

int64_t DeviceUsedBytes(int dev) {
  if (CudaDeviceCount() <= dev) return 0;
  cuda::Get(dev);  // the context exists
  size_t free_bytes = 0, total = 0;
  FRUGAL_CUDA_CHECK(cudaSetDevice(dev));
  FRUGAL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return static_cast<int64_t>(total - free_bytes);
}

int64_t DeviceFreeBytes(int dev) {
  RequireCudaDevice(dev, "free device memory");
  cuda::Get(dev);  // the context exists (it takes memory too)
  size_t free_bytes = 0, total = 0;
  FRUGAL_CUDA_CHECK(cudaSetDevice(dev));
  FRUGAL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return static_cast<int64_t>(free_bytes);
}

void* PinnedAlloc(int64_t bytes) {
  void* p = nullptr;
  FRUGAL_CUDA_CHECK(cudaMallocHost(&p, static_cast<size_t>(bytes)));
  return p;
}
void PinnedFree(void* p) {
  if (p) cudaFreeHost(p);
}

void CopyBytes(void* dst, Device dst_dev, const void* src, Device src_dev, int64_t bytes) {
  if (bytes == 0) return;
  const cudaMemcpyKind kind = cuda::CopyKind(dst_dev, src_dev);
  cuda::Device& d = cuda::Get(dst_dev.type == DeviceType::kCUDA ? dst_dev.id : src_dev.id);
  FRUGAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), kind, d.context()->stream));
  d.Synchronize();
}

void MemsetZero(void* dst, int dev, int64_t bytes) {
  cuda::Device& d = cuda::Get(dev);
  FRUGAL_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), d.context()->stream));
  d.Synchronize();
}

void LaunchAsync(int dev, const std::function<void(cuda::Context*)>& launch, Completion done) {
  cuda::Get(dev).Launch(launch, std::move(done));
}

void Synchronize(int dev) { cuda::Get(dev).Synchronize(); }

}  // namespace backend
}  // namespace frugal
