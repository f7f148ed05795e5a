// OpenCV's image codecs, loaded on first use.
//
// libopencv_imgcodecs brings about 140 libraries with it (GDAL, GDCM,
// poppler, x265, HDF5, ...): linked into frugal they cost every process some
// 35 MiB of resident memory and their relocations at start, though only
// RecordIO images and `frugal im2rec` use them. They live in a module,
// libfrugal_imgcodecs.so (src/io/imgcodecs_module.cc), built beside the
// frugal binary and opened the first time an image is decoded or encoded
// (beside the binary, in its build folder or on LD_LIBRARY_PATH).
// A missing module is an Error naming it and the fix.
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace frugal::imgcodecs {

// Opens the module now (it opens on first use otherwise): a reader of
// images calls it as it opens, so that a missing module is an error then and
// the libraries' resident memory is the process's before its memory is
// planned (ProcessBytes::resident).
void Load();

// cv::imdecode of size bytes at data with `flags` (cv::IMREAD_*); an empty
// Mat if they are not an image OpenCV reads.
cv::Mat Decode(const void* data, size_t size, int flags);

// cv::imread; an empty Mat if the file is missing or not an image.
cv::Mat Read(const std::string& path, int flags);

// cv::imencode to the format of extension `ext` (".png", ".jpg") with
// cv::IMWRITE_* params; false if OpenCV cannot.
bool Encode(const std::string& ext, const cv::Mat& img, const std::vector<int>& params, std::vector<uint8_t>* out);

}  // namespace frugal::imgcodecs
