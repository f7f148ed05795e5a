// libfrugal_imgcodecs.so: the only code that links libopencv_imgcodecs (see
// io/imgcodecs.h). Its entry points take and return plain pointers and
// flags; OpenCV's exceptions stay inside.
#include <opencv2/imgcodecs.hpp>

#include <cstdint>
#include <vector>

extern "C" {

bool frugal_imdecode(const void* data, size_t size, int flags, cv::Mat* out) {
  try {
    const cv::Mat buf(1, static_cast<int>(size), CV_8U, const_cast<void*>(data));
    *out = cv::imdecode(buf, flags);
    return true;
  } catch (const std::exception&) { return false; }
}

bool frugal_imread(const char* path, int flags, cv::Mat* out) {
  try {
    *out = cv::imread(path, flags);
    return true;
  } catch (const std::exception&) { return false; }
}

bool frugal_imencode(const char* ext, const cv::Mat* img, const int* params, size_t num_params,
                     std::vector<uint8_t>* out) {
  try {
    return cv::imencode(ext, *img, *out, std::vector<int>(params, params + num_params));
  } catch (const std::exception&) { return false; }
}

}  // extern "C"
