// libFuzzer target: ReadIdx on arbitrary bytes (plain and, when the input
// starts 1f 8b, gzip) must return a consistent IdxFile or throw
// frugal::Error; anything else (a crash, a sanitizer report, another
// exception, a huge allocation) is a bug.
#include <cstdlib>

#include "frugal/io.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static frugal::fuzz::MemFile file;
  try {
    frugal::IdxFile f = frugal::ReadIdx(file.Set(data, size));
    size_t total = 1;
    for (int64_t d : f.dims) total *= static_cast<size_t>(d);
    if (f.dims.empty() || total != f.bytes.size()) std::abort();  // the contract: bytes = prod(dims)
  } catch (const frugal::Error&) {}
  return 0;
}
