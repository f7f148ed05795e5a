// TensorBoard event files: CRC32C against the standard's check value, record
// framing, and scalars read back through our record reader and the Event
// proto.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "event.pb.h"
#include "frugal/base.h"
#include "frugal/tensorboard.h"
#include "test_util.h"

namespace frugal {
namespace {

TEST(TensorBoard, Crc32cCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8a9136aau);  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62a8ab43u);  // RFC 3720 B.4: 32 bytes of 0xff
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

TEST(TensorBoard, RecordFraming) {
  std::string r = EncodeRecord("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(r[0], 3);
  EXPECT_EQ(r.substr(12, 3), "abc");
}

TEST(TensorBoard, ScalarsReadBack) {
  test::TempDir dir;
  std::string path;
  {
    EventWriter w(dir.path() + "/run1", "frugal");
    path = w.path();
    w.AddScalar("train/loss", 2.5, 0);
    w.AddScalar("train/loss", 1.25, 100);
    w.AddScalar("val/accuracy", 0.875, 100);
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("events.out.tfevents."), std::string::npos);
  EventRecordReader reader(path);
  std::string data;
  std::vector<tb::Event> events;
  while (reader.Next(&data)) {
    tb::Event e;
    ASSERT_TRUE(e.ParseFromString(data));
    events.push_back(e);
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.5e9);
  EXPECT_EQ(events[2].step(), 100);
  ASSERT_EQ(events[2].summary().value_size(), 1);
  EXPECT_EQ(events[2].summary().value(0).tag(), "train/loss");
  EXPECT_EQ(events[2].summary().value(0).simple_value(), 1.25f);
  EXPECT_EQ(events[3].summary().value(0).tag(), "val/accuracy");
  EXPECT_EQ(events[3].summary().value(0).simple_value(), 0.875f);
}

TEST(TensorBoard, ReaderRefusesDamage) {
  test::TempDir dir;
  std::string path;
  {
    EventWriter w(dir.path());
    path = w.path();
    w.AddScalar("loss", 1, 1);
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  auto error_of = [&](const std::string& contents) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
    try {
      EventRecordReader r(path);
      std::string d;
      while (r.Next(&d)) {}
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  std::string bad = bytes;
  bad[bad.size() - 6] ^= 1;  // inside the last record's data
  EXPECT_NE(error_of(bad).find("data CRC mismatch at offset"), std::string::npos) << error_of(bad);
  bad = bytes;
  bad[1] ^= 1;  // the first record's length
  EXPECT_NE(error_of(bad).find("length CRC mismatch at offset 0"), std::string::npos);
  EXPECT_NE(error_of(bytes.substr(0, bytes.size() - 2)).find("truncated record"), std::string::npos);
}

}  // namespace
}  // namespace frugal
