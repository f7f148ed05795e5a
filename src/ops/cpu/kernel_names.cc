#include "ops/cpu/kernel_names.h"

#include <cstring>

namespace frugal::cpu {
namespace {
thread_local std::string* open_names = nullptr;
}  // namespace

KernelNames::KernelNames(std::string* names) : outer_(open_names) { open_names = names; }
KernelNames::~KernelNames() { open_names = outer_; }

bool NamingKernels() { return open_names != nullptr; }

void NoteKernel(const char* name) {
  if (!open_names) return;
  std::string& names = *open_names;
  const size_t n = std::strlen(name);
  for (size_t at = names.find(name); at != std::string::npos; at = names.find(name, at + 1))
    if ((at == 0 || names[at - 1] == ' ') && (at + n == names.size() || names[at + n] == ' ')) return;
  if (!names.empty()) names += ' ';
  names += name;
}

bool IsReference(const std::string& name) { return name.rfind("ref", 0) == 0; }

}  // namespace frugal::cpu
