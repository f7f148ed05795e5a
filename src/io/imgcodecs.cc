// Opening libfrugal_imgcodecs.so once and calling through it. See
// io/imgcodecs.h.
#include "io/imgcodecs.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <optional>

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

// The places the module is looked for, in order: beside the running binary,
// the build folder it was built in, then the loader's own search (RUNPATH,
// LD_LIBRARY_PATH). The first two are explicit because under the sanitizers
// dlopen is called from their runtime, whose (empty) run path the loader uses
// in place of the binary's.
std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) paths.push_back((std::filesystem::path(std::string(exe, n)).parent_path() / kModule).string());
  paths.push_back(std::string(FRUGAL_BUILD_DIR) + "/" + kModule);
  paths.push_back(kModule);
  return paths;
}

Module Open() {
  std::string tried;
  for (const std::string& path : Candidates()) {
    if (path != kModule && !std::filesystem::exists(path)) continue;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
      continue;
    }
    Module mod;
    Bind(handle, "frugal_imdecode", &mod.decode);
    Bind(handle, "frugal_imread", &mod.read);
    Bind(handle, "frugal_imencode", &mod.encode);
    return mod;
  }
  throw Error(Fmt("images need OpenCV's codecs, which frugal loads from ", kModule,
                  ", built beside the frugal binary, but it cannot be opened (", tried,
                  "): build it (cmake --build BUILD) or put its folder on LD_LIBRARY_PATH"));
}

// Opened once; a failure is thrown to every caller, not cached (and never
// thrown out of a function-local static's initializer, on which
// ThreadSanitizer's guard leaves the other waiting threads blocked).
const Module& Get() {
  static std::mutex mu;
  static std::optional<Module> module;
  std::lock_guard<std::mutex> lock(mu);
  if (!module) module = Open();
  return *module;
}

}  // namespace

void Load() { Get(); }

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
