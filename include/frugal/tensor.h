// Storage (an owned, aligned block of device memory) and Tensor (a typed view
// into a Storage at an offset), with per-device accounting of current and
// peak bytes. The accounting is what lets a test prove that the bytes the
// executor allocated equal the bytes the memory plan predicted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "frugal/base.h"

namespace frugal {

// What a Storage holds; accounting keeps a total per kind.
enum class MemKind : uint8_t { kArena, kParam, kInput, kOther, kNumKinds };
const char* MemKindName(MemKind k);

// Current and peak bytes allocated through Storage, per device and kind.
class MemoryAccounting {
 public:
  static MemoryAccounting& Get();
  void Add(Device dev, MemKind kind, int64_t bytes);
  void Sub(Device dev, MemKind kind, int64_t bytes);
  int64_t Current(Device dev) const;
  int64_t Peak(Device dev) const;
  int64_t Current(Device dev, MemKind kind) const;
  int64_t Peak(Device dev, MemKind kind) const;
  // Forgets the peaks (sets them to the current values); for tests and runs.
  void ResetPeaks();

 private:
  struct Counters {
    std::atomic<int64_t> current{0}, peak{0};
  };
  static void Bump(Counters* c, int64_t delta);
  int Slot(Device dev) const;
  static constexpr int kKinds = static_cast<int>(MemKind::kNumKinds);
  std::array<std::array<Counters, kKinds + 1>, 2 * kMaxDevices> c_;  // [.., kKinds] = total
};

// Peak resident memory of this process (VmHWM), in bytes; 0 where unknown.
int64_t ProcessPeakBytes();
// Resident memory of this process now (VmRSS), in bytes; 0 where unknown.
int64_t ProcessResidentBytes();
// Bytes the device could still give this process: on the CPU the kernel's
// MemAvailable, on a GPU the driver's free memory (cudaMemGetInfo).
int64_t AvailableBytes(Device dev);

// An owned block of memory, 64-byte aligned, zero-filled at allocation so
// that its pages are touched once here rather than inside a training step.
// On a CUDA device it is device memory (src/backend/device.h): the arena
// (kArena) one cudaMalloc, anything else from the device's pool. `pinned`
// makes host memory page-locked, for batches copied to a GPU.
class Storage {
 public:
  Storage(Device dev, int64_t bytes, MemKind kind, bool pinned = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return dev_; }
  MemKind kind() const { return kind_; }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device dev_;
  MemKind kind_;
  bool pinned_ = false;
};

// A view: shape + dtype + layout into a Storage at a byte offset. Copying a
// Tensor copies the view, not the data.
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype);
  // Allocates a fresh storage of exactly this tensor's size.
  static Tensor Empty(Shape shape, DType dtype = DType::kFloat32, Device dev = {}, MemKind kind = MemKind::kOther);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  // How its bytes are ordered (kPlain unless the executor bound it to an
  // activation ChooseLayouts made channels-last).
  Layout layout() const { return layout_; }
  // The same view with the bytes declared in layout l.
  Tensor WithLayout(Layout l) const;
  Device device() const { return storage_ ? storage_->device() : Device{}; }
  int64_t size() const { return shape_.Size(); }
  int64_t bytes() const { return size() * DTypeBytes(dtype_); }
  int64_t offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  // The elements of a float32 tensor (checked: a kernel handed a bfloat16
  // tensor it does not support fails here, not with wrong numbers).
  float* f() const;
  // The bits of a bfloat16 tensor (frugal/bf16.h converts them; checked).
  uint16_t* bf16() const;

  // The same bytes seen with another shape of equal size.
  Tensor Reshaped(Shape shape) const;
  // Elements [begin, begin + n) as a 1-D view.
  Tensor Elements(int64_t begin, int64_t n) const;
  // Same size and dtype; across devices too (synchronous with the GPU's stream).
  void CopyFrom(const Tensor& src);
  void Fill(float v);  // float32 only
  // This tensor on the host: itself (a view) on the CPU, a fresh copy from a
  // GPU (synchronous with the GPU's stream).
  Tensor OnHost() const;
  bool on_gpu() const { return device().type == DeviceType::kCUDA; }

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Layout layout_ = Layout::kPlain;
};

}  // namespace frugal
