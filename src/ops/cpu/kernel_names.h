// The library kernels an op ran, for `frugal time`'s kernel column: while a
// KernelNames scope is open on a thread, each kernel an op runs from that
// thread adds its name once: a oneDNN primitive its implementation's
// (`brg:avx512_core`, `jit:avx2`, `ref:any`), the matrix products
// `dnnl_sgemm`, frugal's own vector kernels their ISA (`vec:avx2`). A
// kernel run from an op's own threads (inside its parallel region) is
// named by the call its calling thread makes, if any.
#pragma once

#include <string>

namespace frugal::cpu {

class KernelNames {
 public:
  // Names go into *names, space-separated, each once (across scopes too).
  explicit KernelNames(std::string* names);
  ~KernelNames();
  KernelNames(const KernelNames&) = delete;
  KernelNames& operator=(const KernelNames&) = delete;

 private:
  std::string* outer_;
};

// Whether a scope is open on this thread: a kernel whose name costs a
// lookup (a oneDNN primitive's) asks first.
bool NamingKernels();
// Adds name to the open scope's names, if a scope is open on this thread.
void NoteKernel(const char* name);

// Whether a kernel name is a library's reference (scalar, portable)
// implementation: oneDNN's `ref:` primitives.
bool IsReference(const std::string& name);

}  // namespace frugal::cpu
