// tfevents records and the event writer (format in frugal/tensorboard.h).
#include "frugal/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "event.pb.h"
#include "frugal/base.h"

namespace frugal {
namespace {

// CRC32C (Castagnoli), reflected polynomial 0x82f63b78, one table lookup per byte.
std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}

void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }  // the format is little-endian, as the host
void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

double WallTime() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

uint32_t Crc32c(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = MakeCrc32cTable();  // function-local: built on first use
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string EncodeRecord(const std::string& data) {
  std::string r(12 + data.size() + 4, '\0');
  PutU64(&r[0], data.size());
  PutU32(&r[8], MaskCrc32c(Crc32c(&r[0], 8)));
  std::memcpy(&r[12], data.data(), data.size());
  PutU32(&r[12 + data.size()], MaskCrc32c(Crc32c(data.data(), data.size())));
  return r;
}

EventRecordReader::EventRecordReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  FRUGAL_REQUIRE(in_, "event file ", path, ": cannot open");
}

bool EventRecordReader::Next(std::string* data) {
  char head[12];
  in_.read(head, 12);
  if (in_.gcount() == 0) return false;
  FRUGAL_REQUIRE(in_.gcount() == 12, "event file ", path_, ": truncated record header at offset ", offset_);
  uint64_t len;
  uint32_t len_crc, data_crc;
  std::memcpy(&len, head, 8);
  std::memcpy(&len_crc, head + 8, 4);
  FRUGAL_REQUIRE(len_crc == MaskCrc32c(Crc32c(head, 8)), "event file ", path_, ": length CRC mismatch at offset ",
                 offset_);
  data->resize(len);
  in_.read(data->data(), static_cast<std::streamsize>(len));
  char tail[4];
  in_.read(tail, 4);
  FRUGAL_REQUIRE(in_, "event file ", path_, ": truncated record at offset ", offset_);
  std::memcpy(&data_crc, tail, 4);
  FRUGAL_REQUIRE(data_crc == MaskCrc32c(Crc32c(data->data(), len)), "event file ", path_,
                 ": data CRC mismatch at offset ", offset_);
  offset_ += 16 + static_cast<int64_t>(len);
  return true;
}

EventWriter::EventWriter(const std::string& dir, const std::string& suffix) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  FRUGAL_REQUIRE(!ec && std::filesystem::is_directory(dir), "cannot create the event directory ", dir, ": ",
                 ec.message());
  path_ = Fmt(dir, "/events.out.tfevents.", static_cast<int64_t>(WallTime()), ".", HostName(),
              suffix.empty() ? "" : ".", suffix);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  FRUGAL_REQUIRE(out_, "cannot write the event file ", path_);
  tb::Event e;
  e.set_wall_time(WallTime());
  e.set_file_version("brain.Event:2");
  Write(e.SerializeAsString());
  Flush();
}

EventWriter::~EventWriter() { out_.flush(); }

void EventWriter::AddScalar(const std::string& tag, double value, int64_t step) {
  tb::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  Write(e.SerializeAsString());
}

void EventWriter::Write(const std::string& event) {
  std::string r = EncodeRecord(event);
  out_.write(r.data(), static_cast<std::streamsize>(r.size()));
  FRUGAL_REQUIRE(out_, "cannot write the event file ", path_);
}

void EventWriter::Flush() {
  out_.flush();
  FRUGAL_REQUIRE(out_, "cannot write the event file ", path_);
}

}  // namespace frugal
