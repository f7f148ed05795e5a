// Opening libfrugal_imgcodecs.so once and calling through it. See
// io/imgcodecs.h.
#include "io/imgcodecs.h"

#include <dlfcn.h>

#include "frugal/base.h"

namespace frugal::imgcodecs {
namespace {

constexpr const char* kModule = "libfrugal_imgcodecs.so";

struct Module {
  bool (*decode)(const void*, size_t, int, cv::Mat*);
  bool (*read)(const char*, int, cv::Mat*);
  bool (*encode)(const char*, const cv::Mat*, const int*, size_t, std::vector<uint8_t>*);
};

template <typename F>
void Bind(void* handle, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(handle, name));
  FRUGAL_REQUIRE(*f != nullptr, kModule, " has no ", name, " (", dlerror(),
                 "): it is from another build of frugal; rebuild (cmake --build)");
}

// Found through the binary's run path (the build folder) or LD_LIBRARY_PATH.
const Module& Get() {
  static const Module m = [] {
    void* handle = dlopen(kModule, RTLD_NOW | RTLD_LOCAL);
    FRUGAL_REQUIRE(handle != nullptr, "images need OpenCV's codecs, which frugal loads from ", kModule,
                   ", built beside the frugal binary, but it cannot be opened (", dlerror(),
                   "): build it (cmake --build BUILD) or put its folder on LD_LIBRARY_PATH");
    Module mod;
    Bind(handle, "frugal_imdecode", &mod.decode);
    Bind(handle, "frugal_imread", &mod.read);
    Bind(handle, "frugal_imencode", &mod.encode);
    return mod;
  }();
  return m;
}

}  // namespace

cv::Mat Decode(const void* data, size_t size, int flags) {
  cv::Mat img;
  if (size == 0 || !Get().decode(data, size, flags, &img)) return cv::Mat();
  return img;
}

cv::Mat Read(const std::string& path, int flags) {
  cv::Mat img;
  if (!Get().read(path.c_str(), flags, &img)) return cv::Mat();
  return img;
}

bool Encode(const std::string& ext, const cv::Mat& img, const std::vector<int>& params, std::vector<uint8_t>* out) {
  return Get().encode(ext.c_str(), &img, params.data(), params.size(), out);
}

}  // namespace frugal::imgcodecs
