// RecordIO files (MXNet / dmlc-core compatible): writer, reader, index files
// and the image record header. See frugal/recordio.h for the format.
#include "frugal/recordio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "frugal/base.h"

namespace frugal {
namespace {

constexpr const char* kRecordioFix = "re-create it with `frugal im2rec`";

// Little-endian words, whatever the host.
void PutU32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t GetU64(const char* p) { return GetU32(p) | (static_cast<uint64_t>(GetU32(p + 4)) << 32); }
void PutU64(uint64_t v, char* p) {
  PutU32(static_cast<uint32_t>(v), p);
  PutU32(static_cast<uint32_t>(v >> 32), p + 4);
}
float GetF32(const char* p) {
  uint32_t u = GetU32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
void PutF32(float f, char* p) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  PutU32(u, p);
}

uint32_t Padded(uint32_t len) { return (len + 3u) & ~3u; }

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// "record at byte offset 40" or "record 3 (byte offset 40)".
std::string RecordName(int64_t number, int64_t offset) {
  if (number < 0) return Fmt("record at byte offset ", offset);
  return Fmt("record ", number, " (byte offset ", offset, ")");
}

}  // namespace

// ---------------------------------------------------------------- writer

RecordWriter::RecordWriter(const std::string& path) : path_(path), file_(std::make_unique<AtomicFile>(path)) {}

RecordWriter::~RecordWriter() = default;

void RecordWriter::Put(const void* p, size_t n) {
  FRUGAL_REQUIRE(file_ != nullptr, path_, ": RecordWriter used after Close()");
  buffer_.append(static_cast<const char*>(p), n);
  if (buffer_.size() >= (size_t{1} << 20)) {
    file_->Write(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  offset_ += static_cast<int64_t>(n);
}

int64_t RecordWriter::Write(const void* data, size_t size) {
  FRUGAL_REQUIRE(size <= kRecordIOMaxLength, path_, ": record of ", size, " bytes is too large: RecordIO records ",
                 "hold at most ", kRecordIOMaxLength, " bytes (2^29 - 1; store a smaller image)");
  const int64_t start = offset_;
  const char* bytes = static_cast<const char*>(data);
  char magic[4];
  PutU32(kRecordIOMagic, magic);
  const uint32_t len = static_cast<uint32_t>(size);
  // Cut at every aligned magic word: the part before it ends there (cflag 1
  // for the first part, 2 after), the magic itself is not written.
  uint32_t begin = 0;  // start of the current part's data
  for (uint32_t i = 0; i + 4 <= len; i += 4) {
    if (std::memcmp(bytes + i, magic, 4) != 0) continue;
    char head[8];
    PutU32(kRecordIOMagic, head);
    PutU32(EncodeLRec(begin == 0 ? 1u : 2u, i - begin), head + 4);
    Put(head, 8);
    Put(bytes + begin, i - begin);
    begin = i + 4;
    ++splits_;
  }
  // The last (or only) part: cflag 3 after a cut, else 0; zero padding to 4.
  char head[8];
  PutU32(kRecordIOMagic, head);
  PutU32(EncodeLRec(begin != 0 ? 3u : 0u, len - begin), head + 4);
  Put(head, 8);
  Put(bytes + begin, len - begin);
  const char zeros[4] = {0, 0, 0, 0};
  Put(zeros, Padded(len) - len);
  return start;
}

void RecordWriter::Close() {
  if (file_ == nullptr) return;
  file_->Write(buffer_.data(), buffer_.size());
  buffer_.clear();
  file_->Commit();
  file_.reset();
}

// ---------------------------------------------------------------- reader

RecordReader::RecordReader(const std::string& path) : path_(path) {
  struct stat st;
  FRUGAL_REQUIRE(stat(path.c_str(), &st) == 0, path, ": cannot open RecordIO file: ", std::strerror(errno),
                 " (check the path; make one with `frugal im2rec`)");
  FRUGAL_REQUIRE(!S_ISDIR(st.st_mode), path, ": cannot open RecordIO file: it is a directory (pass a .rec file)");
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FRUGAL_REQUIRE(fd_ >= 0, path, ": cannot open RecordIO file: ", std::strerror(errno),
                 " (check the file's permissions)");
  size_ = static_cast<int64_t>(st.st_size);
}

RecordReader::~RecordReader() {
  if (fd_ >= 0) close(fd_);
}

void RecordReader::ReadExact(int64_t offset, void* buf, size_t n, const char* what, int64_t record_at) const {
  FRUGAL_REQUIRE(offset >= 0 && offset + static_cast<int64_t>(n) <= size_, path_,
                 ": truncated RecordIO file: ", RecordName(-1, record_at), ": ", what, " needs ", n,
                 " bytes at offset ", offset, " but the file has ", size_, " bytes (the file is cut short; ",
                 kRecordioFix, ")");
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd_, static_cast<char*>(buf) + done, n - done, offset + static_cast<int64_t>(done));
    if (got < 0 && errno == EINTR) continue;
    FRUGAL_REQUIRE(got > 0, path_, ": cannot read RecordIO file at offset ", offset + static_cast<int64_t>(done), ": ",
                   got == 0 ? "unexpected end of file (the file shrank while reading?)" : std::strerror(errno));
    done += static_cast<size_t>(got);
  }
}

std::pair<uint32_t, uint32_t> RecordReader::ReadPartHeader(int64_t offset, int64_t record_at) const {
  char head[8];
  ReadExact(offset, head, 8, "a part header", record_at);
  const uint32_t magic = GetU32(head);
  FRUGAL_REQUIRE(magic == kRecordIOMagic, path_, ": bad RecordIO magic ", Hex(magic), " at byte offset ", offset, " (",
                 RecordName(-1, record_at), "): expected ", Hex(kRecordIOMagic),
                 "; this is not a RecordIO file, or the offset (from the index?) is not a record start (", kRecordioFix,
                 ")");
  const uint32_t lrec = GetU32(head + 4);
  const uint32_t cflag = DecodeCFlag(lrec), len = DecodeLength(lrec);
  FRUGAL_REQUIRE(cflag <= 3, path_, ": bad RecordIO part flag ", cflag, " at byte offset ", offset, " (",
                 RecordName(-1, record_at), "): flags are 0 (whole), 1 (first), 2 (middle), 3 (last) (", kRecordioFix,
                 ")");
  FRUGAL_REQUIRE(offset + 8 + static_cast<int64_t>(Padded(len)) <= size_, path_,
                 ": truncated RecordIO file: ", RecordName(-1, record_at), ": the part at byte offset ", offset,
                 " says ", len, " bytes of data (", Padded(len), " padded) but only ", size_ - offset - 8,
                 " follow (the file is cut short; ", kRecordioFix, ")");
  return {cflag, len};
}

int64_t RecordReader::Walk(int64_t offset, std::string* out) const {
  const int64_t record_at = offset;
  uint64_t total = 0;  // bytes of the joined record
  for (bool first = true;; first = false) {
    auto [cflag, len] = ReadPartHeader(offset, record_at);
    if (first) {
      FRUGAL_REQUIRE(cflag == 0 || cflag == 1, path_, ": ", RecordName(-1, record_at), " starts with a part of flag ",
                     cflag, " (", cflag == 2 ? "middle" : "last", " of a split record): a record starts with flag 0 ",
                     "or 1; the offset is not a record start or the file is corrupt (", kRecordioFix, ")");
    } else {
      FRUGAL_REQUIRE(cflag == 2 || cflag == 3, path_, ": ", RecordName(-1, record_at), " is split into parts but the ",
                     "part at byte offset ", offset, " has flag ", cflag,
                     " instead of 2 (middle) or 3 (last): ", "the record's last part is missing (", kRecordioFix, ")");
      total += 4;  // the magic word the writer cut out
    }
    total += len;
    FRUGAL_REQUIRE(total <= kRecordIOMaxLength, path_, ": ", RecordName(-1, record_at), " joins to more than ",
                   kRecordIOMaxLength, " bytes: RecordIO records are smaller than 2^29 bytes (", kRecordioFix, ")");
    if (out != nullptr) {
      if (!first) {
        char magic[4];
        PutU32(kRecordIOMagic, magic);
        out->append(magic, 4);
      }
      const size_t at = out->size();
      out->resize(at + len);
      if (len > 0) ReadExact(offset + 8, &(*out)[at], len, "part data", record_at);
    }
    offset += 8 + Padded(len);
    if (cflag == 0 || cflag == 3) return offset;
  }
}

bool RecordReader::Next(std::string* out) {
  if (pos_ >= size_) return false;
  out->clear();
  pos_ = Walk(pos_, out);
  return true;
}

std::string RecordReader::ReadAt(int64_t offset, int64_t* end) const {
  FRUGAL_REQUIRE(offset >= 0 && offset < size_ && offset % 4 == 0, path_, ": no record at byte offset ", offset,
                 ": offsets are multiples of 4 inside the file's ", size_,
                 " bytes (is the index file from another .rec? re-create both with `frugal im2rec`)");
  std::string out;
  int64_t next = Walk(offset, &out);
  if (end != nullptr) *end = next;
  return out;
}

std::vector<int64_t> RecordReader::ScanOffsets() const {
  std::vector<int64_t> offsets;
  for (int64_t at = 0; at < size_; at = Walk(at, nullptr)) offsets.push_back(at);
  return offsets;
}

// ---------------------------------------------------------------- index files

std::vector<RecordIndexEntry> ReadRecordIndex(const std::string& path) {
  std::ifstream in(path);
  FRUGAL_REQUIRE(in.is_open(), path, ": cannot open RecordIO index file: ", std::strerror(errno),
                 " (check the path; `frugal im2rec` writes it beside the .rec)");
  std::vector<RecordIndexEntry> entries;
  std::set<int64_t> keys;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    RecordIndexEntry e;
    std::string rest;
    const bool ok = static_cast<bool>(fields >> e.key >> e.offset) && !(fields >> rest);
    FRUGAL_REQUIRE(ok, path, ":", line_no, ": bad index line '", line.substr(0, 80),
                   "': expected 'key<TAB>offset' with integer key and byte offset (", kRecordioFix, ")");
    FRUGAL_REQUIRE(e.offset >= 0, path, ":", line_no, ": negative byte offset ", e.offset, " (", kRecordioFix, ")");
    FRUGAL_REQUIRE(keys.insert(e.key).second, path, ":", line_no, ": key ", e.key, " appears twice (", kRecordioFix,
                   ")");
    entries.push_back(e);
  }
  FRUGAL_REQUIRE(!in.bad(), path, ": cannot read RecordIO index file: ", std::strerror(errno));
  return entries;
}

void WriteRecordIndex(const std::string& path, const std::vector<RecordIndexEntry>& entries) {
  std::ostringstream out;
  for (const RecordIndexEntry& e : entries) out << e.key << '\t' << e.offset << '\n';
  WriteFileAtomic(path, out.str());
}

std::vector<int64_t> RecordOffsets(const RecordReader& reader, const std::string& index_path) {
  if (index_path.empty()) return reader.ScanOffsets();
  std::vector<int64_t> offsets;
  for (const RecordIndexEntry& e : ReadRecordIndex(index_path)) {
    FRUGAL_REQUIRE(e.offset < reader.file_size() && e.offset % 4 == 0, index_path, ": key ", e.key, " has byte offset ",
                   e.offset, " but ", reader.path(), " has ", reader.file_size(), " bytes and records start at ",
                   "multiples of 4 (the index belongs to another .rec? re-create both with `frugal im2rec`)");
    offsets.push_back(e.offset);
  }
  std::sort(offsets.begin(), offsets.end());
  auto dup = std::adjacent_find(offsets.begin(), offsets.end());
  FRUGAL_REQUIRE(dup == offsets.end(), index_path, ": byte offset ", dup == offsets.end() ? 0 : *dup,
                 " appears under two keys (", kRecordioFix, ")");
  FRUGAL_REQUIRE(!offsets.empty(), index_path, ": the index lists no records (", kRecordioFix, ")");
  return offsets;
}

// ---------------------------------------------------------------- image records

std::string PackImageRecord(const std::vector<float>& labels, uint64_t id, uint64_t id2, const void* image,
                            size_t image_size) {
  FRUGAL_REQUIRE(!labels.empty(), "PackImageRecord: an image record needs at least one label");
  const bool one = labels.size() == 1;
  const size_t extra = one ? 0 : 4 * labels.size();
  std::string rec(kImageRecordHeaderBytes + extra + image_size, '\0');
  char* p = rec.data();
  PutU32(one ? 0u : static_cast<uint32_t>(labels.size()), p);
  PutF32(one ? labels[0] : 0.f, p + 4);
  PutU64(id, p + 8);
  PutU64(id2, p + 16);
  for (size_t i = 0; i < extra / 4; ++i) PutF32(labels[i], p + kImageRecordHeaderBytes + 4 * i);
  if (image_size > 0) std::memcpy(p + kImageRecordHeaderBytes + extra, image, image_size);
  return rec;
}

ImageRecord UnpackImageRecord(const std::string& record, const std::string& where) {
  FRUGAL_REQUIRE(record.size() >= kImageRecordHeaderBytes, where, ": image record of ", record.size(),
                 " bytes is shorter than its ", kImageRecordHeaderBytes, "-byte header (is this an image .rec? ",
                 kRecordioFix, ")");
  ImageRecord r;
  const char* p = record.data();
  r.flag = GetU32(p);
  r.id = GetU64(p + 8);
  r.id2 = GetU64(p + 16);
  size_t at = kImageRecordHeaderBytes;
  if (r.flag == 0) {
    r.labels = {GetF32(p + 4)};
  } else {
    const uint64_t need = kImageRecordHeaderBytes + 4ull * r.flag;
    FRUGAL_REQUIRE(need <= record.size(), where, ": image record header says ", r.flag, " labels (", 4ull * r.flag,
                   " bytes) but the record has only ", record.size() - kImageRecordHeaderBytes,
                   " bytes after its header (", kRecordioFix, ")");
    r.labels.resize(r.flag);
    for (uint32_t i = 0; i < r.flag; ++i) r.labels[i] = GetF32(p + at + 4 * i);
    at = static_cast<size_t>(need);
  }
  r.image.assign(record, at, std::string::npos);
  return r;
}

}  // namespace frugal
