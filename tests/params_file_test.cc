// The params file: round trip, and every kind of damage rejected with a
// clear one-line error.
#include <gtest/gtest.h>

#include <fstream>

#include "frugal/params_file.h"
#include "test_util.h"

namespace frugal::test {
namespace {

NamedTensors Sample() {
  Tensor w = Tensor::Empty(Shape{2, 3});
  for (int k = 0; k < 6; ++k) w.f()[k] = 0.5f * k - 1;
  Tensor b = Tensor::Empty(Shape{3});
  b.Fill(-0.25f);
  Tensor s = Tensor::Empty(Shape(std::vector<int64_t>{}));  // a scalar
  s.f()[0] = 3.5f;
  return {{"fc1_weight", w}, {"fc1_bias", b}, {"scale", s}};
}

std::string ErrorOf(const std::string& bytes) {
  try {
    DecodeParams(bytes, "p.params");
  } catch (const Error& e) { return e.what(); }
  return "";
}

TEST(ParamsFile, RoundTripsThroughAFile) {
  TempDir dir;
  SaveParams(dir.File("p.params"), Sample());
  NamedTensors back = LoadParams(dir.File("p.params"));
  NamedTensors want = Sample();
  ASSERT_EQ(back.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(back[k].first, want[k].first);
    ASSERT_EQ(back[k].second.shape(), want[k].second.shape());
    for (int64_t i = 0; i < want[k].second.size(); ++i) EXPECT_EQ(back[k].second.f()[i], want[k].second.f()[i]);
  }
  // The layout is the documented one: 16-byte header, payload, 4-byte CRC.
  std::string bytes = EncodeParams(Sample());
  EXPECT_EQ(bytes.substr(0, 8), "FRGPARAM");
  size_t payload = (4 + 10 + 4 + 16 + 24) + (4 + 8 + 4 + 8 + 12) + (4 + 5 + 4 + 0 + 4);
  EXPECT_EQ(bytes.size(), 16 + payload + 4);
  EXPECT_TRUE(DecodeParams(EncodeParams({}), "empty").empty());
}

TEST(ParamsFile, RejectsBadMagicAndVersion) {
  std::string bytes = EncodeParams(Sample());
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_EQ(ErrorOf(magic), "p.params: not a frugal params file (bad magic; expected it to start with FRGPARAM)");
  std::string version = bytes;
  version[8] = 2;
  EXPECT_EQ(ErrorOf(version), "p.params: params file version 2 is not supported (this build reads 1)");
}

TEST(ParamsFile, RejectsEveryTruncation) {
  const std::string bytes = EncodeParams(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string e = ErrorOf(bytes.substr(0, n));
    EXPECT_NE(e, "") << "a file cut to " << n << " bytes was accepted";
    if (n >= 20) {
      EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("checksum") != std::string::npos)
          << n << ": " << e;
    }
  }
  EXPECT_NE(ErrorOf(bytes.substr(0, 40)).find("truncated params file: it ends inside tensor 0 of 3 'fc1_weight'"),
            std::string::npos)
      << ErrorOf(bytes.substr(0, 40));
}

TEST(ParamsFile, RejectsABadChecksumAndTrailingBytes) {
  const std::string bytes = EncodeParams(Sample());
  std::string flipped = bytes;
  flipped[16 + 4 + 10 + 4 + 16 + 5] ^= 0x10;  // inside fc1_weight's values
  EXPECT_NE(ErrorOf(flipped).find("p.params: checksum mismatch"), std::string::npos) << ErrorOf(flipped);
  std::string crc = bytes;
  crc.back() ^= 1;
  EXPECT_NE(ErrorOf(crc).find("checksum mismatch"), std::string::npos);
  std::string extra = bytes.substr(0, bytes.size() - 4) + "abcd" + bytes.substr(bytes.size() - 4);
  EXPECT_NE(ErrorOf(extra).find("4 unexpected bytes after the last tensor"), std::string::npos) << ErrorOf(extra);
}

TEST(ParamsFile, LoadNamesAMissingFile) {
  try {
    LoadParams("/nonexistent/x.params");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/x.params: cannot open the params file (check the path)");
  }
}

}  // namespace
}  // namespace frugal::test
