// The checkpoint file: atomic writing and verified reading (format in
// frugal/checkpoint.h).
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "frugal/checkpoint.h"
#include "frugal/io.h"

namespace frugal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the checkpoint format is little-endian");

constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'K'};
constexpr int64_t kHeaderBytes = 24;  // magic, version, crc, payload bytes
enum Section : uint8_t { kParams = 1, kAux = 2, kOptState = 3, kGradSums = 4 };

uint32_t Crc32(uint32_t crc, const char* p, int64_t n) {
  while (n > 0) {  // zlib takes uInt lengths
    uInt chunk = static_cast<uInt>(std::min<int64_t>(n, 1 << 30));
    crc = static_cast<uint32_t>(crc32(crc, reinterpret_cast<const Bytef*>(p), chunk));
    p += chunk;
    n -= chunk;
  }
  return crc;
}

std::string ErrnoText() { return std::strerror(errno); }

// Writes the payload to a file descriptor, keeping its CRC and size; the
// fault hook stops it as a crash would.
class PayloadWriter {
 public:
  PayloadWriter(AtomicFile* f, int64_t crash_after) : f_(*f), crash_after_(crash_after) {}
  struct Crash {};

  void Bytes(const void* data, int64_t n) {
    const char* p = static_cast<const char*>(data);
    crc_ = Crc32(crc_, p, n);
    payload_ += n;
    if (crash_after_ >= 0 && written_ + n > crash_after_) {
      Raw(p, crash_after_ - written_);
      throw Crash{};
    }
    Raw(p, n);
  }
  template <typename T>
  void Pod(T v) {
    Bytes(&v, sizeof(v));
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    Bytes(s.data(), static_cast<int64_t>(s.size()));
  }
  void Raw(const char* p, int64_t n) {
    if (n <= 0) return;  // a simulated crash inside the header: nothing more
    f_.Write(p, static_cast<size_t>(n));
    written_ += n;
  }
  uint32_t crc() const { return crc_; }
  int64_t payload() const { return payload_; }

 private:
  AtomicFile& f_;
  int64_t crash_after_, written_ = 0, payload_ = 0;
  uint32_t crc_ = 0;
};

void WriteTensors(PayloadWriter* w, Section section, const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, t] : tensors) {
    w->Pod<uint8_t>(section);
    w->Str(name);
    w->Pod<uint8_t>(static_cast<uint8_t>(t.dtype()));
    w->Pod<uint32_t>(static_cast<uint32_t>(t.shape().ndim()));
    for (int64_t d : t.shape().dims()) w->Pod<int64_t>(d);
    w->Bytes(t.raw(), t.bytes());
  }
}

void WritePayload(PayloadWriter* w, const CheckpointState& s) {
  w->Str(s.config_text);
  w->Pod<int64_t>(s.epoch);
  w->Pod<int64_t>(s.iteration);
  w->Pod<int64_t>(s.data_position);
  w->Pod<int64_t>(s.lr_schedule_iters);
  w->Str(s.rng_state);
  w->Str(s.optimizer);
  w->Pod<uint32_t>(static_cast<uint32_t>(s.params.size() + s.aux.size() + s.opt_state.size() + s.grad_sums.size()));
  WriteTensors(w, kParams, s.params);
  WriteTensors(w, kAux, s.aux);
  WriteTensors(w, kOptState, s.opt_state);
  WriteTensors(w, kGradSums, s.grad_sums);
}

// Reads the verified payload, every read bounds-checked.
class PayloadReader {
 public:
  PayloadReader(std::ifstream* in, int64_t size, const std::string& path) : in_(in), left_(size), path_(path) {}
  void Bytes(void* p, int64_t n) {
    Need(n, "data");
    in_->read(static_cast<char*>(p), n);
    FRUGAL_REQUIRE(*in_, "checkpoint ", path_, ": read error");
    left_ -= n;
  }
  template <typename T>
  T Pod() {
    T v;
    Bytes(&v, sizeof(v));
    return v;
  }
  std::string Str() {
    uint64_t n = Pod<uint64_t>();
    Need(static_cast<int64_t>(std::min<uint64_t>(n, INT64_MAX)), "a string");
    std::string s(n, '\0');
    Bytes(s.data(), static_cast<int64_t>(n));
    return s;
  }
  void Need(int64_t n, const char* what) {
    FRUGAL_REQUIRE(n >= 0 && n <= left_, "checkpoint ", path_, ": malformed payload (", what, " of ", n,
                   " bytes runs past its end; written by another format?)");
  }
  int64_t left() const { return left_; }

 private:
  std::ifstream* in_;
  int64_t left_;
  std::string path_;
};

void ReadTensor(PayloadReader* r, CheckpointState* s, const std::string& path) {
  uint8_t section = r->Pod<uint8_t>();
  std::string name = r->Str();
  uint8_t dtype = r->Pod<uint8_t>();
  uint32_t ndim = r->Pod<uint32_t>();
  FRUGAL_REQUIRE(
      section >= kParams && section <= kGradSums && dtype == static_cast<uint8_t>(DType::kFloat32) && ndim <= 16,
      "checkpoint ", path, ": malformed tensor '", name, "' (section ", int(section), ", dtype ", int(dtype), ", ",
      ndim, " dims)");
  std::vector<int64_t> dims(ndim);
  int64_t size = 1;
  for (int64_t& d : dims) {
    d = r->Pod<int64_t>();
    FRUGAL_REQUIRE(d >= 0 && (d == 0 || size <= r->left() / d), "checkpoint ", path, ": tensor '", name,
                   "' has a bad dim ", d);
    size *= d;
  }
  r->Need(size * 4, "tensor data");
  Tensor t = Tensor::Empty(Shape(dims), DType::kFloat32);
  r->Bytes(t.raw(), t.bytes());
  auto& dst = section == kParams     ? s->params
              : section == kAux      ? s->aux
              : section == kOptState ? s->opt_state
                                     : s->grad_sums;
  FRUGAL_REQUIRE(dst.emplace(name, t).second, "checkpoint ", path, ": tensor '", name, "' appears twice");
}

}  // namespace

void SaveCheckpoint(const std::string& path, const CheckpointState& s, const CheckpointFault& fault) {
  std::string tmp;
  try {
    AtomicFile f(path);
    tmp = f.temp_path();
    PayloadWriter w(&f, fault.crash_after_bytes);
    try {
      char header[kHeaderBytes] = {};
      w.Raw(header, kHeaderBytes);  // filled in once the payload's CRC is known
      WritePayload(&w, s);
      std::memcpy(header, kMagic, 8);
      uint32_t version = kCheckpointVersion, crc = w.crc();
      uint64_t payload = static_cast<uint64_t>(w.payload());
      std::memcpy(header + 8, &version, 4);
      std::memcpy(header + 12, &crc, 4);
      std::memcpy(header + 16, &payload, 8);
      FRUGAL_REQUIRE(::pwrite(f.fd(), header, kHeaderBytes, 0) == kHeaderBytes, path, ": cannot write (", ErrnoText(),
                     ")");
      f.Commit();
    } catch (const PayloadWriter::Crash&) {
      f.Abandon();  // a crash leaves the temporary file as it is
      throw;
    }
  } catch (const PayloadWriter::Crash&) {
    throw Error(Fmt("checkpoint ", path, ": simulated crash after ", fault.crash_after_bytes, " bytes of ", tmp));
  } catch (const Error& e) {
    throw Error(Fmt("cannot write checkpoint ", e.what()));  // "cannot write checkpoint PATH: ..."
  }
}

CheckpointState LoadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_REQUIRE(in, "checkpoint ", path, ": cannot open (", ErrnoText(), ")");
  in.seekg(0, std::ios::end);
  const int64_t file_bytes = in.tellg();
  in.seekg(0);
  FRUGAL_REQUIRE(file_bytes >= kHeaderBytes, "checkpoint ", path, ": truncated (", file_bytes,
                 " bytes, shorter than the ", kHeaderBytes, "-byte header)");
  char header[kHeaderBytes];
  in.read(header, kHeaderBytes);
  FRUGAL_REQUIRE(std::memcmp(header, kMagic, 8) == 0, "checkpoint ", path,
                 ": bad magic (not a frugal checkpoint; expected the file to start with FRUGALCK)");
  uint32_t version, crc;
  uint64_t payload;
  std::memcpy(&version, header + 8, 4);
  std::memcpy(&crc, header + 12, 4);
  std::memcpy(&payload, header + 16, 8);
  FRUGAL_REQUIRE(version >= 1 && version <= kCheckpointVersion, "checkpoint ", path, ": format version ", version,
                 ", but this build reads versions 1 to ", kCheckpointVersion);
  const uint64_t have = static_cast<uint64_t>(file_bytes - kHeaderBytes);
  FRUGAL_REQUIRE(have >= payload, "checkpoint ", path, ": truncated (the header promises ", payload,
                 " payload bytes, the file has ", have, ")");
  FRUGAL_REQUIRE(have == payload, "checkpoint ", path, ": ", have - payload,
                 " unexpected bytes after the payload (corrupted)");

  // Pass 1: the checksum over the whole payload, before trusting any of it.
  std::vector<char> buf(1 << 20);
  uint32_t computed = 0;
  for (uint64_t left = payload; left > 0;) {
    int64_t n = static_cast<int64_t>(std::min<uint64_t>(left, buf.size()));
    in.read(buf.data(), n);
    FRUGAL_REQUIRE(in, "checkpoint ", path, ": read error");
    computed = Crc32(computed, buf.data(), n);
    left -= n;
  }
  FRUGAL_REQUIRE(computed == crc, "checkpoint ", path, ": checksum mismatch (stored 0x", std::hex, crc, ", computed 0x",
                 computed, "): the file is corrupted");

  // Pass 2: parse.
  in.seekg(kHeaderBytes);
  PayloadReader r(&in, static_cast<int64_t>(payload), path);
  CheckpointState s;
  s.version = version;
  s.config_text = r.Str();
  s.epoch = r.Pod<int64_t>();
  s.iteration = r.Pod<int64_t>();
  s.data_position = r.Pod<int64_t>();
  if (version >= 2) s.lr_schedule_iters = r.Pod<int64_t>();
  s.rng_state = r.Str();
  s.optimizer = r.Str();
  for (uint32_t i = 0, n = r.Pod<uint32_t>(); i < n; ++i) ReadTensor(&r, &s, path);
  FRUGAL_REQUIRE(r.left() == 0, "checkpoint ", path, ": malformed payload (", r.left(), " bytes left over)");
  return s;
}

}  // namespace frugal
