// libFuzzer target: LoadCifar on arbitrary bytes (the first byte picks
// CIFAR-10, coarse or fine labels) must return a consistent Dataset or throw
// frugal::Error; anything else is a bug.
#include <cstdlib>

#include "frugal/io.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static frugal::fuzz::MemFile file;
  if (size == 0) return 0;
  const frugal::CifarLabel which = static_cast<frugal::CifarLabel>(data[0] % 3);
  try {
    frugal::Dataset ds = frugal::LoadCifar({file.Set(data + 1, size - 1)}, which);
    const int64_t rec = (which == frugal::CifarLabel::kCifar10 ? 1 : 2) + 3072;
    if (ds.num_samples * rec != static_cast<int64_t>(size - 1)) std::abort();
    if (static_cast<int64_t>(ds.pixels.size()) != ds.num_samples * 3072) std::abort();
    for (float y : ds.y)
      if (y < 0 || y >= 100) std::abort();
  } catch (const frugal::Error&) {}
  return 0;
}
