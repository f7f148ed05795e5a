#include "frugal/tensor.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <vector>

#include "backend/device.h"

namespace frugal {

const char* MemKindName(MemKind k) {
  switch (k) {
    case MemKind::kArena: return "arena";
    case MemKind::kParam: return "param";
    case MemKind::kInput: return "input";
    case MemKind::kOther: return "other";
    case MemKind::kNumKinds: break;
  }
  return "?";
}

MemoryAccounting& MemoryAccounting::Get() {
  static MemoryAccounting* acc = new MemoryAccounting();  // never destroyed
  return *acc;
}

int MemoryAccounting::Slot(Device dev) const {
  CHECK(dev.id >= 0 && dev.id < kMaxDevices) << "device id " << dev.id << " out of range";
  return (dev.type == DeviceType::kCPU ? 0 : kMaxDevices) + dev.id;
}

void MemoryAccounting::Bump(Counters* c, int64_t delta) {
  int64_t now = c->current.fetch_add(delta) + delta;
  int64_t peak = c->peak.load();
  while (now > peak && !c->peak.compare_exchange_weak(peak, now)) {}
}

void MemoryAccounting::Add(Device dev, MemKind kind, int64_t bytes) {
  auto& row = c_[Slot(dev)];
  Bump(&row[static_cast<int>(kind)], bytes);
  Bump(&row[kKinds], bytes);
}

void MemoryAccounting::Sub(Device dev, MemKind kind, int64_t bytes) {
  auto& row = c_[Slot(dev)];
  row[static_cast<int>(kind)].current -= bytes;
  row[kKinds].current -= bytes;
}

int64_t MemoryAccounting::Current(Device dev) const { return c_[Slot(dev)][kKinds].current; }
int64_t MemoryAccounting::Peak(Device dev) const { return c_[Slot(dev)][kKinds].peak; }
int64_t MemoryAccounting::Current(Device dev, MemKind kind) const {
  return c_[Slot(dev)][static_cast<int>(kind)].current;
}
int64_t MemoryAccounting::Peak(Device dev, MemKind kind) const { return c_[Slot(dev)][static_cast<int>(kind)].peak; }

void MemoryAccounting::ResetPeaks() {
  for (auto& row : c_)
    for (auto& c : row) c.peak = c.current.load();
}

namespace {
// The "<key> <n> kB" line of a /proc file, in bytes; -1 when absent.
int64_t ProcKiloBytes(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string word;
  int64_t kb = 0;
  while (in >> word) {
    if (word == key) return in >> kb ? kb * 1024 : -1;
    in.ignore(1 << 20, '\n');
  }
  return -1;
}
}  // namespace

int64_t ProcessPeakBytes() { return std::max<int64_t>(0, ProcKiloBytes("/proc/self/status", "VmHWM:")); }

int64_t ProcessResidentBytes() { return std::max<int64_t>(0, ProcKiloBytes("/proc/self/status", "VmRSS:")); }

int64_t AvailableBytes(Device dev) {
  if (dev.type == DeviceType::kCUDA) return backend::DeviceFreeBytes(dev.id);
  const int64_t bytes = ProcKiloBytes("/proc/meminfo", "MemAvailable:");
  FRUGAL_REQUIRE(bytes >= 0,
                 "/proc/meminfo has no MemAvailable line: cannot tell how much memory this machine has free");
  return bytes;
}

Storage::Storage(Device dev, int64_t bytes, MemKind kind, bool pinned)
    : bytes_(bytes), dev_(dev), kind_(kind), pinned_(pinned && dev.type == DeviceType::kCPU) {
  CHECK_GE(bytes, 0);
  if (dev.type == DeviceType::kCUDA) {
    if (bytes > 0) {
      data_ = backend::DeviceAlloc(dev.id, bytes, kind == MemKind::kArena);
      backend::MemsetZero(data_, dev.id, bytes);
    }
  } else if (pinned_) {
    if (bytes > 0) {
      data_ = backend::PinnedAlloc(bytes);
      std::memset(data_, 0, bytes);
    }
  } else if (bytes > 0) {
    size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded);
    if (data_ == nullptr) {
      throw Error(Fmt("out of host memory allocating ", HumanBytes(bytes), " (", MemKindName(kind),
                      "); try a smaller batch or a memory strategy that recomputes"));
    }
    std::memset(data_, 0, rounded);
  }
  MemoryAccounting::Get().Add(dev_, kind_, bytes_);
}

Storage::~Storage() {
  if (dev_.type == DeviceType::kCUDA) {
    backend::DeviceFree(dev_.id, data_, bytes_, kind_ == MemKind::kArena);
  } else if (pinned_) {
    backend::PinnedFree(data_);
  } else {
    std::free(data_);
  }
  MemoryAccounting::Get().Sub(dev_, kind_, bytes_);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {
  CHECK(shape_.known());
  CHECK_LE(offset_ + bytes(), storage_->bytes())
      << "view " << shape_ << " at offset " << offset_ << " overruns storage";
}

Tensor Tensor::Empty(Shape shape, DType dtype, Device dev, MemKind kind) {
  int64_t bytes = shape.Size() * DTypeBytes(dtype);
  return Tensor(std::make_shared<Storage>(dev, bytes, kind), 0, std::move(shape), dtype);
}

float* Tensor::f() const {
  CHECK(dtype_ == DType::kFloat32) << "a " << DTypeName(dtype_) << " tensor " << shape_
                                   << " read as float32 (a kernel without a " << DTypeName(dtype_) << " path)";
  return data<float>();
}

uint16_t* Tensor::bf16() const {
  CHECK(dtype_ == DType::kBFloat16) << "a " << DTypeName(dtype_) << " tensor " << shape_ << " read as bfloat16";
  return data<uint16_t>();
}

Tensor Tensor::WithLayout(Layout l) const {
  CHECK(l == Layout::kPlain || shape_.ndim() == 4) << "a " << LayoutName(l) << " layout needs 4 dims, not " << shape_;
  Tensor t = *this;
  t.layout_ = l;
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  CHECK(layout_ == Layout::kPlain) << "reshaping a " << LayoutName(layout_) << " tensor";
  CHECK_EQ(shape.Size(), size()) << "reshape " << shape_ << " -> " << shape;
  return Tensor(storage_, offset_, std::move(shape), dtype_);
}

Tensor Tensor::Elements(int64_t begin, int64_t n) const {
  CHECK(layout_ == Layout::kPlain) << "a slice of a " << LayoutName(layout_) << " tensor";
  CHECK(begin >= 0 && n >= 0 && begin + n <= size()) << "elements [" << begin << ", " << begin + n << ") of " << shape_;
  return Tensor(storage_, offset_ + begin * DTypeBytes(dtype_), Shape({n}), dtype_);
}

void Tensor::CopyFrom(const Tensor& src) {
  CHECK_EQ(src.bytes(), bytes());
  if (src.raw() == raw()) return;
  if (on_gpu() || src.on_gpu()) return backend::CopyBytes(raw(), device(), src.raw(), src.device(), bytes());
  std::memmove(raw(), src.raw(), bytes());
}

Tensor Tensor::OnHost() const {
  if (!on_gpu()) return *this;
  Tensor h = Empty(shape_, dtype_);
  h.CopyFrom(*this);
  return h;
}

void Tensor::Fill(float v) {
  CHECK(dtype_ == DType::kFloat32);
  if (on_gpu()) {
    std::vector<float> host(size(), v);
    return backend::CopyBytes(raw(), device(), host.data(), Device{}, bytes());
  }
  std::fill(f(), f() + size(), v);
}

}  // namespace frugal
