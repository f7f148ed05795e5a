// RecordIO: the exact bytes dmlc-core writes (whole and split records), reading
// back, index files, shards, image record headers, and malformed files.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "frugal/recordio.h"
#include "test_util.h"

namespace frugal::test {
namespace {

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
const std::string kMagic = Le32(0xced7230a);

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes records with RecordWriter and returns the file's bytes.
std::string WriteRecords(const TempDir& dir, const std::vector<std::string>& records,
                         std::vector<int64_t>* offsets = nullptr) {
  RecordWriter w(dir.File("x.rec"));
  for (const std::string& r : records) {
    int64_t at = w.Write(r);
    if (offsets) offsets->push_back(at);
  }
  w.Close();
  return ReadAll(dir.File("x.rec"));
}

std::vector<std::string> ReadRecords(const std::string& path) {
  RecordReader r(path);
  std::vector<std::string> out;
  std::string rec;
  while (r.Next(&rec)) out.push_back(rec);
  return out;
}

TEST(RecordIO, WholeRecordBytesMatchDmlc) {
  TempDir dir;
  // magic, lrec (cflag 0, length 3), "abc", one zero of padding; then an empty record.
  std::string bytes = WriteRecords(dir, {"abc", ""});
  EXPECT_EQ(bytes, kMagic + Le32(3) + "abc" + std::string(1, '\0') + kMagic + Le32(0));
}

TEST(RecordIO, MagicInsideIsSplitLikeDmlc) {
  TempDir dir;
  // An aligned magic word cuts the record: first part cflag 1, last cflag 3,
  // the magic itself dropped. A misaligned one (offset 13) is kept as data.
  const std::string data = "ABCD" + kMagic + "EFGH" + "x" + kMagic + "yyy";
  RecordWriter w(dir.File("x.rec"));
  w.Write(data);
  w.Close();
  EXPECT_EQ(w.splits(), 1);
  const std::string expect = kMagic + Le32(1u << 29 | 4) + "ABCD" +                         // first part
                             kMagic + Le32(3u << 29 | 12) + "EFGH" + "x" + kMagic + "yyy";  // last part
  EXPECT_EQ(ReadAll(dir.File("x.rec")), expect);
  EXPECT_EQ(ReadRecords(dir.File("x.rec")), std::vector<std::string>{data});
}

TEST(RecordIO, MagicAtEdgesAndTwiceGivesEmptyParts) {
  TempDir dir;
  // Magic first, twice in a row, and last: parts of length 0 with cflag 1, 2, 2, 3.
  const std::string data = kMagic + "ab" + "cd" + kMagic + kMagic;
  std::string bytes = WriteRecords(dir, {data, "tail"});
  const std::string expect = kMagic + Le32(1u << 29 | 0) + kMagic + Le32(2u << 29 | 4) + "abcd" + kMagic +
                             Le32(2u << 29 | 0) + kMagic + Le32(3u << 29 | 0) + kMagic + Le32(4) + "tail";
  EXPECT_EQ(bytes, expect);
  EXPECT_EQ(ReadRecords(dir.File("x.rec")), (std::vector<std::string>{data, "tail"}));
}

TEST(RecordIO, RoundTripManyRecordsAndReadAt) {
  TempDir dir;
  std::vector<std::string> recs;
  for (int i = 0; i < 50; ++i) {
    std::string r;
    for (int k = 0; k < i * 7; ++k) r.push_back(static_cast<char>(k * 13 + i));
    if (i % 5 == 0) r += kMagic + "z";  // some split records
    recs.push_back(r);
  }
  std::vector<int64_t> offsets;
  WriteRecords(dir, recs, &offsets);
  EXPECT_EQ(ReadRecords(dir.File("x.rec")), recs);
  RecordReader reader(dir.File("x.rec"));
  EXPECT_EQ(reader.ScanOffsets(), offsets);
  for (int i : {49, 0, 10, 33}) {
    int64_t end = 0;
    EXPECT_EQ(reader.ReadAt(offsets[i], &end), recs[i]);
    EXPECT_EQ(end, i + 1 < 50 ? offsets[i + 1] : reader.file_size());
  }
  reader.Seek(offsets[48]);
  std::string r;
  ASSERT_TRUE(reader.Next(&r));
  EXPECT_EQ(r, recs[48]);
}

TEST(RecordIO, TooLargeRecordIsRefused) {
  TempDir dir;
  RecordWriter w(dir.File("x.rec"));
  char byte = 0;
  // The size check comes before any byte is read, so a 1-byte buffer is enough.
  ExpectError([&] { w.Write(&byte, size_t{1} << 29); }, {"too large", "536870911"});
}

TEST(RecordIO, TruncatedFilesAreRefused) {
  TempDir dir;
  const std::string bytes = WriteRecords(dir, {"hello world!", "second"});
  // Cut inside the first header, inside the data, and inside the second header.
  for (size_t cut : {size_t{5}, size_t{14}, size_t{22}}) {
    std::string f = dir.Write("cut.rec", bytes.substr(0, cut));
    ExpectError([&] { ReadRecords(f); }, {f, "truncated RecordIO file"});
  }
  std::string f = dir.Write("cut.rec", bytes.substr(0, 14));
  ExpectError([&] { ReadRecords(f); }, {"says 12 bytes of data", "only 6 follow"});
}

TEST(RecordIO, MalformedFilesAreRefused) {
  TempDir dir;
  std::string f = dir.Write("a.rec", Le32(0x12345678) + Le32(0));
  ExpectError([&] { ReadRecords(f); }, {f, "bad RecordIO magic 0x12345678", "byte offset 0", "0xced7230a"});
  f = dir.Write("b.rec", kMagic + Le32(5u << 29 | 0));
  ExpectError([&] { ReadRecords(f); }, {f, "bad RecordIO part flag 5"});
  f = dir.Write("c.rec", kMagic + Le32(2u << 29 | 0));
  ExpectError([&] { ReadRecords(f); }, {f, "starts with a part of flag 2"});
  f = dir.Write("d.rec", kMagic + Le32(1u << 29 | 0) + kMagic + Le32(0));
  ExpectError([&] { ReadRecords(f); }, {f, "flag 0 instead of 2 (middle) or 3 (last)", "byte offset 8"});
  f = dir.Write("e.rec", kMagic + Le32(1u << 29 | 0));
  ExpectError([&] { ReadRecords(f); }, {f, "truncated"});
  ExpectError([&] { RecordReader r(dir.File("none.rec")); }, {"none.rec", "cannot open"});
  RecordReader ok(dir.Write("ok.rec", kMagic + Le32(0)));
  ExpectError([&] { ok.ReadAt(2); }, {"no record at byte offset 2"});
  ExpectError([&] { ok.ReadAt(8); }, {"no record at byte offset 8"});
}

TEST(RecordIO, IndexFileRoundTripAndOffsets) {
  TempDir dir;
  std::vector<int64_t> offsets;
  WriteRecords(dir, {"a", "bb", "ccc"}, &offsets);
  // Keys need not follow file order; RecordOffsets sorts by offset.
  std::vector<RecordIndexEntry> idx = {{7, offsets[2]}, {3, offsets[0]}, {5, offsets[1]}};
  WriteRecordIndex(dir.File("x.idx"), idx);
  EXPECT_EQ(ReadAll(dir.File("x.idx")),
            "7\t" + std::to_string(offsets[2]) + "\n3\t0\n5\t" + std::to_string(offsets[1]) + "\n");
  std::vector<RecordIndexEntry> back = ReadRecordIndex(dir.File("x.idx"));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].key, 7);
  EXPECT_EQ(back[0].offset, offsets[2]);
  RecordReader reader(dir.File("x.rec"));
  EXPECT_EQ(RecordOffsets(reader, dir.File("x.idx")), offsets);
  EXPECT_EQ(RecordOffsets(reader, ""), offsets);
}

TEST(RecordIO, BadIndexFilesAreRefused) {
  TempDir dir;
  WriteRecords(dir, {"a", "bb"});
  RecordReader reader(dir.File("x.rec"));
  std::string f = dir.Write("a.idx", "0\t0\n1\tzz\n");
  ExpectError([&] { ReadRecordIndex(f); }, {f + ":2:", "bad index line '1\tzz'"});
  f = dir.Write("b.idx", "0\t0\n0\t12\n");
  ExpectError([&] { ReadRecordIndex(f); }, {f + ":2:", "key 0 appears twice"});
  f = dir.Write("c.idx", "0\t-4\n");
  ExpectError([&] { ReadRecordIndex(f); }, {f + ":1:", "negative"});
  f = dir.Write("d.idx", "0\t0\n1\t4000\n");
  ExpectError([&] { RecordOffsets(reader, f); }, {f, "key 1 has byte offset 4000", "the index belongs to another"});
  f = dir.Write("e.idx", "0\t0\n1\t0\n");
  ExpectError([&] { RecordOffsets(reader, f); }, {f, "byte offset 0 appears under two keys"});
  f = dir.Write("f.idx", "0\t0\n1\t6\n");
  ExpectError([&] { RecordOffsets(reader, f); }, {f, "multiples of 4"});
}

TEST(RecordIO, ImageRecordHeaderMatchesMxnet) {
  // One label: flag 0, the label in the header.
  std::string one = PackImageRecord({2.5f}, 7, 9, "JPG", 3);
  EXPECT_EQ(one, Le32(0) + Le32(0x40200000) + Le32(7) + Le32(0) + Le32(9) + Le32(0) + "JPG");
  ImageRecord r = UnpackImageRecord(one, "x");
  EXPECT_EQ(r.flag, 0u);
  EXPECT_EQ(r.labels, std::vector<float>{2.5f});
  EXPECT_EQ(r.id, 7u);
  EXPECT_EQ(r.id2, 9u);
  EXPECT_EQ(r.image, "JPG");
  // Several labels: flag = count, header label 0, the labels after the header.
  std::string three = PackImageRecord({1.f, 2.f, -1.f}, 1, 0, "P", 1);
  EXPECT_EQ(three.substr(0, 8), Le32(3) + Le32(0));
  EXPECT_EQ(three.substr(24, 12), Le32(0x3f800000) + Le32(0x40000000) + Le32(0xbf800000));
  r = UnpackImageRecord(three, "x");
  EXPECT_EQ(r.labels, (std::vector<float>{1.f, 2.f, -1.f}));
  EXPECT_EQ(r.image, "P");
}

TEST(RecordIO, ShortImageRecordsAreRefused) {
  ExpectError([] { UnpackImageRecord(std::string(10, 'x'), "f.rec: record 4"); },
              {"f.rec: record 4", "10 bytes", "24-byte header"});
  std::string rec = Le32(1000) + std::string(20, '\0') + "abcd";
  ExpectError([&] { UnpackImageRecord(rec, "f.rec: record 5"); }, {"record 5", "says 1000 labels", "only 4 bytes"});
}

}  // namespace
}  // namespace frugal::test
