// TensorBoard event files: scalars a run reports (loss, accuracy, lr, ...)
// as TensorFlow's Event protos in a tfevents file that TensorBoard reads.
//
// A tfevents file is a sequence of records:
//   uint64 length (little-endian), uint32 masked CRC32C of the length bytes,
//   length bytes of data (a serialized Event), uint32 masked CRC32C of the data
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 and CRC32C is the
// Castagnoli CRC (crc32c("123456789") = 0xe3069283). The first event holds
// file_version "brain.Event:2"; each scalar is an Event with wall_time, step
// and a Summary with one Value {tag, simple_value}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace frugal {

uint32_t Crc32c(const void* data, size_t n);
uint32_t MaskCrc32c(uint32_t crc);
// One framed record holding data.
std::string EncodeRecord(const std::string& data);

// Reads the records of a tfevents file back, checking both CRCs of each.
class EventRecordReader {
 public:
  // Throws Error if the file cannot be opened.
  explicit EventRecordReader(const std::string& path);
  // The next record's data; false at a clean end of file. Throws Error
  // naming the file and the record's offset for a truncated record or a CRC
  // mismatch.
  bool Next(std::string* data);

 private:
  std::string path_;
  std::ifstream in_;
  int64_t offset_ = 0;
};

class EventWriter {
 public:
  // Creates dir if missing and the file
  // dir/events.out.tfevents.<unix seconds>.<hostname>[.<suffix>], and writes
  // the file_version event. Throws Error naming the file if it cannot.
  explicit EventWriter(const std::string& dir, const std::string& suffix = "");
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One scalar event (wall time now). Buffered until Flush or destruction.
  void AddScalar(const std::string& tag, double value, int64_t step);
  void Flush();
  const std::string& path() const { return path_; }

 private:
  void Write(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

}  // namespace frugal
