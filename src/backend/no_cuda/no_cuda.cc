// The backend entry points of a build without CUDA (FRUGAL_CUDA=OFF, or
// AUTO without a toolkit): no devices, and anything that needs one says so.
#include "backend/device.h"

namespace frugal::backend {
namespace {
[[noreturn]] void NoCuda(const char* what) {
  throw Error(Fmt(what,
                  ": frugal was built without CUDA (configure with -DFRUGAL_CUDA=ON where the CUDA "
                  "toolkit and cuDNN are installed)"));
}
}  // namespace

bool BuiltWithCuda() { return false; }
int CudaDeviceCount() { return 0; }
std::string NoCudaReason() { return "frugal was built without CUDA"; }
void RequireCudaDevice(int id, const std::string& what) { NoCuda(what.c_str()); }
void* DeviceAlloc(int, int64_t, bool) { NoCuda("device memory"); }
void DeviceFree(int, void*, int64_t, bool) {}
int64_t PoolReservedBytes(int) { return 0; }
int64_t DeviceUsedBytes(int) { return 0; }
int64_t DeviceFreeBytes(int) { NoCuda("device memory"); }
void* PinnedAlloc(int64_t) { NoCuda("pinned memory"); }
void PinnedFree(void*) {}
void CopyBytes(void*, Device, const void*, Device, int64_t) { NoCuda("device copy"); }
void MemsetZero(void*, int, int64_t) { NoCuda("device memset"); }
void LaunchAsync(int, const std::function<void(cuda::Context*)>&, Completion) { NoCuda("CUDA launch"); }
void Synchronize(int) {}
void CopyAsync(cuda::Context*, void*, Device, const void*, Device, int64_t) { NoCuda("device copy"); }

}  // namespace frugal::backend
