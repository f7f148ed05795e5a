// libFuzzer target for RecordIO. Arbitrary bytes, read as a record file
// (scan, sequential, at every offset, as image records) and as an index file,
// must read or throw frugal::Error. And any bytes written as one record must
// read back unchanged (the magic-word splitting round trip).
#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "frugal/recordio.h"
#include "fuzz_util.h"

namespace {

void ReadAsRecordFile(const std::string& path) {
  try {
    frugal::RecordReader reader(path);
    std::vector<int64_t> offsets = reader.ScanOffsets();
    // A clean scan promises clean reads of every record.
    std::string rec;
    size_t n = 0;
    while (reader.Next(&rec)) {
      if (n >= offsets.size()) std::abort();
      if (reader.ReadAt(offsets[n]) != rec) std::abort();
      ++n;
      try {
        frugal::UnpackImageRecord(rec, path);
      } catch (const frugal::Error&) {}
    }
    if (n != offsets.size()) std::abort();
  } catch (const frugal::Error&) {}
}

void ReadAsIndexFile(const std::string& path) {
  try {
    frugal::ReadRecordIndex(path);
  } catch (const frugal::Error&) {}
}

// The round trip writes a file in a folder of its own: RecordWriter writes
// beside its path and renames (an AtomicFile), which a memfd's /proc path
// cannot take.
const std::string& RoundTripPath() {
  static const std::string path = [] {
    char dir[] = "/tmp/frugal_fuzz_XXXXXX";
    if (!mkdtemp(dir)) std::abort();
    return std::string(dir) + "/round.rec";
  }();
  return path;
}

void RoundTrip(const uint8_t* data, size_t size, const std::string& path) {
  {
    frugal::RecordWriter w(path);
    w.Write(data, size);
    w.Write("tail", 4);
    w.Close();
  }
  frugal::RecordReader r(path);
  std::string rec;
  if (!r.Next(&rec) || rec != std::string(reinterpret_cast<const char*>(data), size)) std::abort();
  if (!r.Next(&rec) || rec != "tail" || r.Next(&rec)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static frugal::fuzz::MemFile file;
  const std::string& path = file.Set(data, size);
  ReadAsRecordFile(path);
  ReadAsIndexFile(path);
  RoundTrip(data, size, RoundTripPath());
  return 0;
}
