// Checkpoints: round trip, every kind of damaged file refused with its
// message, interrupted writes, keep-last-K, resume and --weights loading.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "frugal/checkpoint.h"
#include "frugal/io.h"
#include "frugal/rng.h"
#include "test_util.h"

namespace frugal {
namespace {

using test::TempDir;

Tensor Ramp(Shape shape, float start) {
  Tensor t = Tensor::Empty(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.f()[i] = start + 0.5f * i;
  return t;
}

CheckpointState Sample(int64_t iteration = 1234) {
  CheckpointState s;
  s.config_text = "version: 1\nnode { name: \"fc\" op: \"fully_connected\" }\n";
  s.epoch = 3;
  s.iteration = iteration;
  s.data_position = 17;
  s.lr_schedule_iters = 300;
  Rng rng(9);
  rng.Next();
  s.rng_state = rng.Save();
  s.optimizer = "adam";
  s.params["fc_weight"] = Ramp(Shape{4, 3}, 1);
  s.params["fc_bias"] = Ramp(Shape{4}, -2);
  s.aux["bn_moving_mean"] = Ramp(Shape{3}, 7);
  s.opt_state["fc_weight/m"] = Ramp(Shape{4, 3}, 0.25f);
  s.opt_state["fc_weight/v"] = Ramp(Shape{4, 3}, 3);
  s.opt_state["scalar/m"] = Ramp(Shape(std::vector<int64_t>{}), 5);  // a scalar
  return s;
}

void ExpectSameTensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const Tensor& u = b.at(name);
    ASSERT_EQ(t.shape(), u.shape()) << name;
    for (int64_t i = 0; i < t.size(); ++i) ASSERT_EQ(t.f()[i], u.f()[i]) << name << "[" << i << "]";
  }
}

std::string LoadError(const std::string& path) {
  try {
    LoadCheckpoint(path);
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checkpoint, RoundTrip) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  CheckpointState s = Sample();
  SaveCheckpoint(path, s);
  CheckpointState r = LoadCheckpoint(path);
  EXPECT_EQ(r.config_text, s.config_text);
  EXPECT_EQ(r.epoch, 3);
  EXPECT_EQ(r.iteration, 1234);
  EXPECT_EQ(r.data_position, 17);
  EXPECT_EQ(r.lr_schedule_iters, 300);
  EXPECT_EQ(r.optimizer, "adam");
  EXPECT_EQ(r.rng_state, s.rng_state);
  ExpectSameTensors(s.params, r.params);
  ExpectSameTensors(s.aux, r.aux);
  ExpectSameTensors(s.opt_state, r.opt_state);
  // The restored generator continues the saved stream.
  Rng a(9), b(0);
  a.Next();
  b.Load(r.rng_state);
  EXPECT_EQ(a.Next(), b.Next());
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(Checkpoint, TruncatedFilesAreRefused) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  SaveCheckpoint(path, Sample());
  const std::string bytes = ReadFile(path);
  WriteFile(path, bytes.substr(0, bytes.size() - 10));
  std::string e = LoadError(path);
  EXPECT_NE(e.find("checkpoint " + path + ": truncated (the header promises"), std::string::npos) << e;
  WriteFile(path, bytes.substr(0, 10));
  e = LoadError(path);
  EXPECT_NE(e.find("truncated (10 bytes, shorter than the 24-byte header)"), std::string::npos) << e;
  WriteFile(path, bytes + "xyz");
  e = LoadError(path);
  EXPECT_NE(e.find("3 unexpected bytes after the payload"), std::string::npos) << e;
}

TEST(Checkpoint, FlippedByteIsRefused) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  SaveCheckpoint(path, Sample());
  std::string bytes = ReadFile(path);
  for (size_t at : {size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] ^= 0x10;
    WriteFile(path, bad);
    std::string e = LoadError(path);
    EXPECT_NE(e.find("checkpoint " + path + ": checksum mismatch (stored 0x"), std::string::npos) << at << ": " << e;
    EXPECT_NE(e.find("the file is corrupted"), std::string::npos) << e;
  }
}

TEST(Checkpoint, BadMagicAndVersionAreRefused) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  SaveCheckpoint(path, Sample());
  std::string bytes = ReadFile(path);
  std::string bad = bytes;
  bad[0] = 'X';
  WriteFile(path, bad);
  EXPECT_NE(LoadError(path).find(": bad magic (not a frugal checkpoint"), std::string::npos) << LoadError(path);
  bad = bytes;
  bad[8] = 7;  // version, little-endian
  WriteFile(path, bad);
  EXPECT_NE(LoadError(path).find(": format version 7, but this build reads versions 1 to 3"), std::string::npos)
      << LoadError(path);
  EXPECT_NE(LoadError(dir.File("none.frugal")).find("none.frugal: cannot open"), std::string::npos);
}

// A checkpoint of format version 1 (before lr_schedule_iters) still loads,
// with no schedule length: the resumed run's own length applies, as it did.
TEST(Checkpoint, VersionOneFilesLoadWithoutAScheduleLength) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  const CheckpointState s = Sample();
  SaveCheckpoint(path, s);
  std::string bytes = ReadFile(path);
  // The payload without the int64 after data_position, under a version-1 header.
  const size_t field = 24 + 8 + s.config_text.size() + 3 * 8;
  std::string payload = bytes.substr(24, field - 24) + bytes.substr(field + 8);
  const uint32_t version = 1,
                 crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(payload.data()), payload.size()));
  const uint64_t size = payload.size();
  std::string header = bytes.substr(0, 24);
  std::memcpy(&header[8], &version, 4);
  std::memcpy(&header[12], &crc, 4);
  std::memcpy(&header[16], &size, 8);
  WriteFile(path, header + payload);
  const CheckpointState r = LoadCheckpoint(path);
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(r.lr_schedule_iters, 0);
  EXPECT_EQ(r.data_position, 17);
  EXPECT_EQ(r.optimizer, "adam");
  ExpectSameTensors(s.params, r.params);
}

TEST(Checkpoint, InterruptedWriteLeavesThePreviousCheckpoint) {
  TempDir dir;
  CheckpointManager m(dir.path(), 0, 3);
  const std::string first = m.Save(Sample(100));
  // A crash while writing the next checkpoint, at several points.
  for (int64_t after : {int64_t{0}, int64_t{30}, int64_t{400}}) {
    CheckpointFault fault;
    fault.crash_after_bytes = after;
    try {
      m.Save(Sample(200), fault);
      FAIL() << "the fault did not fire";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("simulated crash"), std::string::npos) << e.what();
    }
    EXPECT_EQ(m.List(), std::vector<std::string>{first});  // the temporary is not a checkpoint
    EXPECT_EQ(m.Latest(), first);
    EXPECT_EQ(LoadCheckpoint(first).iteration, 100);
  }
  // A crash while overwriting the same file keeps the old contents.
  CheckpointState changed = Sample(100);
  changed.epoch = 99;
  CheckpointFault fault;
  fault.crash_after_bytes = 100;
  EXPECT_THROW(SaveCheckpoint(first, changed, fault), Error);
  EXPECT_EQ(LoadCheckpoint(first).epoch, 3);
  // The next complete save works.
  EXPECT_EQ(LoadCheckpoint(m.Save(Sample(200))).iteration, 200);
}

TEST(Checkpoint, UnwritableDirectoryIsAnError) {
  try {
    SaveCheckpoint("/nonexistent-dir/a.frugal", Sample());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write checkpoint /nonexistent-dir/a.frugal"), std::string::npos)
        << e.what();
  }
}

// A folder holds one run: its manager locks it, and a second one, in this
// process or in another (frugal train into the same folder), is refused
// naming the holder's pid; the lock goes with the manager.
TEST(Checkpoint, AFolderIsLockedByTheRunWritingIt) {
  TempDir dir;
  const std::string pid = std::to_string(::getpid());
  {
    CheckpointManager m(dir.path(), 0, 2);
    test::ExpectError([&] { CheckpointManager(dir.path(), 0, 2); },
                      {dir.path(), "is in use by another run (pid " + pid + ")", "another --checkpoint-dir"});
    test::RunResult r = test::RunFrugal(
        "train --config models/mlp/fashion_mnist.prototxt --max-iters 1 --checkpoint-dir " + dir.path());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("is in use by another run (pid " + pid + ")"), std::string::npos) << r.output;
  }
  CheckpointManager again(dir.path(), 0, 2);
  EXPECT_EQ(again.List().size(), 0u);
}

// Every file frugal writes goes through an AtomicFile: a write into a missing
// folder or onto a folder is one line naming the path and leaves nothing; an
// uncommitted file leaves the old contents and no temporary.
TEST(Checkpoint, WritesAreWholeOrNotAtAll) {
  TempDir dir;
  test::ExpectError([&] { WriteFileAtomic(dir.path(), "x"); }, {dir.path() + ": is a folder"});
  test::ExpectError([&] { WriteFileAtomic(dir.File("no/such/f.txt"), "x"); },
                    {dir.File("no/such/f.txt") + ": cannot write", "No such file or directory"});
  WriteFileAtomic(dir.File("f.txt"), "old");
  {
    AtomicFile f(dir.File("f.txt"));
    f.Write("new", 3);
  }  // not committed
  EXPECT_EQ(ReadTextFile(dir.File("f.txt")), "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1) << "no temporary left";
  std::filesystem::create_directory(dir.File("t.svg"));
  test::RunResult r =
      test::RunFrugal("plan --config models/mlp/fashion_mnist.prototxt --timeline " + dir.File("t.svg"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("frugal: error: --timeline " + dir.File("t.svg") + ": is a folder"), std::string::npos)
      << r.output;
}

TEST(Checkpoint, ManagerRemovesTheTemporariesOfDeadWritesOnly) {
  TempDir dir;
  // 99999999 is past Linux's largest pid (4194304): that writer is gone.
  const std::string dead = dir.File(".ckpt-0000000100.frugal.tmp-99999999");
  const std::string alive = dir.File(".ckpt-0000000100.frugal.tmp-" + std::to_string(::getpid()));
  const std::string other = dir.File(".notes.tmp-99999999");
  for (const std::string& f : {dead, alive, other}) std::ofstream(f) << "partial";
  CheckpointManager m(dir.path(), 0, 2);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));  // a write in progress
  EXPECT_TRUE(std::filesystem::exists(other));  // not a checkpoint's
}

TEST(Checkpoint, ManagerKeepsTheLastK) {
  TempDir dir;
  CheckpointManager m(dir.path() + "/ckpts", 0, 2);  // creates the directory
  for (int64_t it : {10, 20, 30, 40}) m.Save(Sample(it));
  EXPECT_EQ(m.List(), (std::vector<std::string>{m.PathFor(30), m.PathFor(40)}));
  EXPECT_EQ(m.PathFor(40), dir.path() + "/ckpts/ckpt-0000000040.frugal");
  // Ordering is numeric, not by name length.
  m.Save(Sample(12345678901));
  EXPECT_EQ(m.Latest(), m.PathFor(12345678901));
  CheckpointManager all(dir.path() + "/all", 0, 0);
  for (int64_t it : {1, 2, 3, 4}) all.Save(Sample(it));
  EXPECT_EQ(all.List().size(), 4u);
}

TEST(Checkpoint, ManagerIntervals) {
  TempDir dir;
  CheckpointManager every_epoch(dir.path() + "/a", 0, 1), every_100(dir.path() + "/b", 100, 1);
  EXPECT_TRUE(every_epoch.Due(37, true));
  EXPECT_FALSE(every_epoch.Due(100, false));
  EXPECT_TRUE(every_100.Due(200, false));
  EXPECT_FALSE(every_100.Due(150, true));
  EXPECT_FALSE(every_100.Due(0, false));
}

TEST(Checkpoint, RestoreRequiresAnExactMatch) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  SaveCheckpoint(path, Sample());
  CheckpointState r = LoadCheckpoint(path);
  std::map<std::string, Tensor> bound = {{"fc_weight", Tensor::Empty(Shape{4, 3})},
                                         {"fc_bias", Tensor::Empty(Shape{4})}};
  RestoreTensors(r.params, bound, "parameters", path);
  ExpectSameTensors(r.params, bound);
  bound["fc_bias"] = Tensor::Empty(Shape{5});
  bound["fc2_weight"] = Tensor::Empty(Shape{2});
  try {
    RestoreTensors(r.params, bound, "parameters", path);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("its parameters do not match the model's: 1 missing (fc2_weight), 1 of another shape "
                     "(fc_bias: file (4), model (5))"),
              std::string::npos)
        << m;
  }
  // Many differences: the count of each and the first name, not every name.
  for (int k = 0; k < 20; ++k) bound[Fmt("extra", k)] = Tensor::Empty(Shape{1});
  try {
    RestoreTensors(r.params, bound, "parameters", path);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(": 21 missing (the first: extra0), 1 of another shape"), std::string::npos) << m;
    EXPECT_EQ(m.find("extra1"), std::string::npos) << m;
  }
}

TEST(Checkpoint, WeightsLoadByNameWithAReport) {
  TempDir dir;
  const std::string path = dir.File("a.frugal");
  SaveCheckpoint(path, Sample());
  std::map<std::string, Tensor> model = {{"fc_weight", Tensor::Empty(Shape{4, 3})},
                                         {"fc_bias", Tensor::Empty(Shape{2})},
                                         {"bn_moving_mean", Tensor::Empty(Shape{3})},
                                         {"out_weight", Tensor::Empty(Shape{3, 3})}};
  model["fc_bias"].Fill(-1);
  WeightsReport r = LoadWeights(path, model);
  EXPECT_EQ(r.matched, (std::vector<std::string>{"bn_moving_mean", "fc_weight"}));
  EXPECT_EQ(r.missing, std::vector<std::string>{"out_weight"});
  EXPECT_EQ(r.wrong_shape, std::vector<std::string>{"fc_bias: file (4), model (2)"});
  EXPECT_TRUE(r.unused.empty());
  EXPECT_EQ(model["fc_weight"].f()[5], 1 + 0.5f * 5);
  EXPECT_EQ(model["fc_bias"].f()[0], -1);  // left alone
  EXPECT_EQ(r.ToString("w.frugal"),
            "weights w.frugal: 2 matched, 1 missing (out_weight), 1 wrong shape (fc_bias: file (4), model (2)), "
            "0 unused");
}

}  // namespace
}  // namespace frugal
