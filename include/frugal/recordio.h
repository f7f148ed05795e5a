// RecordIO: the record file format of MXNet (dmlc-core's recordio.h), read and
// written byte for byte compatibly, plus MXNet's image record header and its
// .idx index files.
//
// A record file is a sequence of parts, each 4-byte aligned:
//
//   uint32 magic = 0xced7230a   (little-endian, as every word here)
//   uint32 lrec  = cflag << 29 | length      (length < 2^29)
//   length bytes of data, then zero padding to a multiple of 4
//
// cflag 0 is a whole record. A record whose data holds the magic word at a
// 4-byte aligned position is cut there into parts (dmlc-core's writer does
// this so a reader can find record starts by scanning for the magic): cflag 1
// is the first part, 2 a middle part, 3 the last; the magic word itself is
// dropped from the data and put back by the reader between parts. Records of
// 2^29 bytes or more are refused, as dmlc-core refuses them.
//
// An image record (MXNet's IRHeader, 24 bytes) starts with
//   uint32 flag, float32 label, uint64 id, uint64 id2
// then, when flag > 0, `flag` float32 labels (and the header's label is
// unused), then the encoded image (JPEG, PNG, ...).
//
// An index file (.idx, MXNet's MXIndexedRecordIO) has one "key\toffset" line
// per record: the record's integer key and the byte offset of its first part.
//
// Every problem the user can cause throws frugal::Error naming the file, the
// record (number and byte offset), the sizes and the fix.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frugal/base.h"

namespace frugal {

constexpr uint32_t kRecordIOMagic = 0xced7230a;
// Largest data length of one part, and of one whole record: 2^29 - 1.
constexpr uint32_t kRecordIOMaxLength = (1u << 29) - 1;

inline uint32_t EncodeLRec(uint32_t cflag, uint32_t length) { return (cflag << 29) | length; }
inline uint32_t DecodeCFlag(uint32_t lrec) { return (lrec >> 29) & 7u; }
inline uint32_t DecodeLength(uint32_t lrec) { return lrec & kRecordIOMaxLength; }

// Writes records to a new file (truncating an existing one).
class RecordWriter {
 public:
  // Throws Error if the file cannot be created. The file appears whole at
  // Close() (an AtomicFile): a writer destroyed before it leaves no file.
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Appends one record and returns the byte offset of its first part (what
  // an index stores). Throws Error for a record of 2^29 bytes or more, or a
  // failed write.
  int64_t Write(const void* data, size_t size);
  int64_t Write(const std::string& data) { return Write(data.data(), data.size()); }
  // Writes the file; throws Error if anything failed to reach it.
  void Close();

  // Bytes written so far (the offset of the next record).
  int64_t Tell() const { return offset_; }
  // How many times a magic word inside a record forced a split (dmlc-core's
  // except_counter).
  int64_t splits() const { return splits_; }
  const std::string& path() const { return path_; }

 private:
  void Put(const void* p, size_t n);
  std::string path_;
  std::unique_ptr<AtomicFile> file_;
  std::string buffer_;  // written to file_ a MiB at a time
  int64_t offset_ = 0;
  int64_t splits_ = 0;
};

// Reads records from a file, sequentially or at a byte offset. ReadAt is
// safe to call from several threads at once (it uses pread).
class RecordReader {
 public:
  // Throws Error if the file is missing, a directory or unreadable.
  explicit RecordReader(const std::string& path);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Reads the next whole record (joining its parts) into *out; returns false
  // at the end of the file. Throws Error for a truncated or malformed file.
  bool Next(std::string* out);
  // Reads the whole record whose first part starts at `offset`; returns the
  // offset just past it in *end if end is non-null.
  std::string ReadAt(int64_t offset, int64_t* end = nullptr) const;
  // Moves the sequential position (for Next) to a record start.
  void Seek(int64_t offset) { pos_ = offset; }
  int64_t Tell() const { return pos_; }

  // The offsets of every record, found by walking the part headers (data is
  // skipped, not read). Checks the whole file's structure.
  std::vector<int64_t> ScanOffsets() const;

  int64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  // Reads exactly n bytes at offset or throws (what names the item read).
  void ReadExact(int64_t offset, void* buf, size_t n, const char* what, int64_t record_at) const;
  // Reads and checks one part header at offset; returns (cflag, length).
  std::pair<uint32_t, uint32_t> ReadPartHeader(int64_t offset, int64_t record_at) const;
  // Walks one record from offset; appends its data to *out when out is set.
  int64_t Walk(int64_t offset, std::string* out) const;
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t pos_ = 0;
};

// One line of an index file.
struct RecordIndexEntry {
  int64_t key = 0;
  int64_t offset = 0;
};

// Reads an index file ("key\toffset" lines; blank lines are skipped).
// Throws Error naming the file and line for anything else, a negative
// offset or a repeated key.
std::vector<RecordIndexEntry> ReadRecordIndex(const std::string& path);
// Writes an index file, one "key\toffset" line per entry.
void WriteRecordIndex(const std::string& path, const std::vector<RecordIndexEntry>& entries);

// The record offsets to read, in file order: from the index file when
// index_path is non-empty (checked against the record file: offsets sorted
// by offset, inside the file), else by scanning the record file.
std::vector<int64_t> RecordOffsets(const RecordReader& reader, const std::string& index_path);

// The decoded content of an image record.
struct ImageRecord {
  uint32_t flag = 0;          // 0: one label; k > 0: k labels
  std::vector<float> labels;  // 1 (flag 0) or flag values
  uint64_t id = 0, id2 = 0;
  std::string image;  // the encoded image bytes
};

constexpr size_t kImageRecordHeaderBytes = 24;

// MXNet's recordio.pack: one label gives flag 0 and the label in the header;
// several give flag = their count and follow the header.
std::string PackImageRecord(const std::vector<float>& labels, uint64_t id, uint64_t id2, const void* image,
                            size_t image_size);
// MXNet's recordio.unpack. `where` (file and record) prefixes errors: a
// record shorter than its header and labels throws.
ImageRecord UnpackImageRecord(const std::string& record, const std::string& where);

}  // namespace frugal
