// TextIter: language-model batches from a text corpus, character or word
// level, in truncated-BPTT streams or shuffled independent sequences. See
// frugal/io.h.
//
// BPTT layout (as PyTorch's word_language_model batchify): the N tokens are
// cut into B streams of L = floor(N / B) tokens (stream b is tokens
// [b*L, (b+1)*L)); batch i holds, in row b, tokens [i*T, i*T + T) of stream b
// and as labels the tokens one further. A batch row therefore continues the
// same row of the batch before, so a recurrent state can be carried over.
#include <algorithm>
#include <cctype>

#include "frugal/base.h"
#include "frugal/io.h"
#include "io/order.h"

namespace frugal {
namespace {

const char* const kUnk = "<unk>";
const char* const kEos = "<eos>";

// Calls fn(token) for every token of text, in order.
template <typename Fn>
void ForEachToken(const std::string& text, TextLevel level, Fn fn) {
  if (level == TextLevel::kChar) {
    for (char c : text) fn(std::string(1, c));
    return;
  }
  // Words: whitespace-separated, "<eos>" after every line (also the last,
  // unterminated one, but not after a final newline).
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const size_t eol = std::min(text.find('\n', i), n);
    size_t j = i;
    while (j < eol) {
      while (j < eol && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      size_t k = j;
      while (k < eol && !std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k > j) fn(text.substr(j, k - j));
      j = k;
    }
    fn(std::string(kEos));
    i = eol + 1;
  }
}

}  // namespace

int64_t Vocabulary::Id(const std::string& token) const {
  auto it = ids.find(token);
  return it == ids.end() ? 0 : it->second;
}

std::string ReadTextFile(const std::string& path) {
  std::string text = ReadFileBytes(path, "text corpus", "data/text/prepare.sh builds data/text/corpus.txt");
  FRUGAL_REQUIRE(!text.empty(), path, ": the text corpus is empty");
  return text;
}

Vocabulary BuildVocabulary(const std::string& text, TextLevel level) {
  Vocabulary v;
  v.level = level;
  v.tokens = {kUnk};
  v.ids[kUnk] = 0;
  ForEachToken(text, level, [&](const std::string& t) {
    if (v.ids.emplace(t, v.size()).second) v.tokens.push_back(t);
  });
  return v;
}

std::vector<int64_t> Tokenize(const std::string& text, const Vocabulary& vocab) {
  std::vector<int64_t> ids;
  if (vocab.level == TextLevel::kChar) {
    // A byte table is much faster than hashing one-byte strings.
    int64_t table[256];
    for (int b = 0; b < 256; ++b) table[b] = vocab.Id(std::string(1, static_cast<char>(b)));
    ids.reserve(text.size());
    for (char c : text) ids.push_back(table[static_cast<unsigned char>(c)]);
    return ids;
  }
  ForEachToken(text, vocab.level, [&](const std::string& t) { ids.push_back(vocab.Id(t)); });
  return ids;
}

TextIter::TextIter(const TextIterOptions& opts) : o_(opts) {
  const std::string& p = opts.path;
  FRUGAL_REQUIRE(opts.seq_len >= 1, p, ": seq_len is ", opts.seq_len, " but must be >= 1");
  FRUGAL_REQUIRE(opts.batch_size >= 1, p, ": batch_size is ", opts.batch_size, " but must be >= 1");
  const std::string text = ReadTextFile(p);
  vocab_ = BuildVocabulary(opts.vocab_path.empty() || opts.vocab_path == p ? text : ReadTextFile(opts.vocab_path),
                           opts.level);
  io::CheckShard(opts.shard, p);
  tokens_ = Tokenize(text, vocab_);
  const int64_t n = static_cast<int64_t>(tokens_.size()), t = opts.seq_len, b = opts.batch_size * opts.shard.num_parts;
  if (opts.bptt) {
    stream_len_ = n / b;  // the streams of the global batch; this part continues its rows' streams
    FRUGAL_REQUIRE(stream_len_ >= t + 1, p, ": ", n, " tokens cut into ", b, " streams give ", stream_len_,
                   " tokens each, fewer than seq_len + 1 = ", t + 1,
                   " (use a larger corpus, a smaller batch or seq_len)");
  } else {
    FRUGAL_REQUIRE(n >= t + 1, p, ": ", n, " tokens are fewer than seq_len + 1 = ", t + 1,
                   " (use a larger corpus or a smaller seq_len)");
  }
  Reset(0);
}

int64_t TextIter::num_samples() const {
  const int64_t n = static_cast<int64_t>(tokens_.size());
  return o_.bptt ? batches_per_epoch() * o_.batch_size * o_.shard.num_parts : (n - 1) / o_.seq_len;
}

int64_t TextIter::batches_per_epoch() const {
  if (o_.bptt) return (stream_len_ - 1) / o_.seq_len;
  return io::PartBatchCount(num_samples(), o_.batch_size, o_.shard.num_parts);
}

void TextIter::Reset(int64_t epoch) {
  FRUGAL_REQUIRE(epoch >= 0, o_.path, ": epoch is ", epoch, " but must be >= 0");
  position_ = 0;
  if (!o_.bptt) order_ = io::EpochOrder(num_samples(), o_.shuffle, o_.seed, epoch);
}

bool TextIter::Next(float* data, float* label, int64_t* num_valid) {
  if (position_ >= batches_per_epoch()) return false;
  FRUGAL_REQUIRE(data != nullptr && label != nullptr, o_.path, ": Next needs data and label buffers");
  const int64_t t = o_.seq_len, b = o_.batch_size, s = num_samples();
  // This part's rows of the global batch: its streams, or its positions in the order.
  const int64_t first = io::PartFirst(o_.bptt ? 0 : position_, b, o_.shard.part_index, o_.shard.num_parts);
  const int64_t valid = o_.bptt ? b : io::ValidRows(s, first, b);
  for (int64_t r = 0; r < b; ++r) {
    // The first token of row r: in stream first+r at position*T, or sequence k at k*T.
    const int64_t start =
        o_.bptt ? (first + r) * stream_len_ + position_ * t : order_[(first + r) % s] * t;  // rows past the end wrap
    for (int64_t k = 0; k < t; ++k) {
      data[r * t + k] = static_cast<float>(tokens_[start + k]);
      label[r * t + k] = static_cast<float>(tokens_[start + k + 1]);
    }
  }
  if (num_valid != nullptr) *num_valid = valid;
  ++position_;
  return true;
}

std::string TextIter::Describe() const {
  return Fmt(o_.path, ": ", tokens_.size(), " ", o_.level == TextLevel::kChar ? "characters" : "words", ", vocabulary ",
             vocab_.size(), ", seq_len ", o_.seq_len, ", batch ", o_.batch_size,
             io::DescribePart(o_.shard, o_.batch_size),
             o_.bptt ? Fmt(", ", o_.batch_size * o_.shard.num_parts, " BPTT streams of ", stream_len_, " tokens")
                     : Fmt(", ", num_samples(), " sequences", o_.shuffle ? ", shuffled" : ""));
}

}  // namespace frugal
