// frugal predict: a checkpoint's model (its inference graph: Predictor,
// frugal/predict.h) on the user's samples, or a language model's text.
//   frugal predict --checkpoint CK [--config C] --input X --out Y.npy [--top-k K]
//     X: a .npy of samples (N, data.sample_shape...); a folder or list of
//     images (the model's data are images); a text file (a language model).
//   frugal predict --checkpoint CK --prompt TEXT --generate N [--temperature T] [--top-k K] [--seed S]
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "frugal.pb.h"
#include "frugal/checkpoint.h"
#include "frugal/io.h"
#include "frugal/predict.h"

DEFINE_int32(top_k, 0,
             "predict: print each sample's K most probable classes; with --generate, draw from the K most probable "
             "(0: all)");
DEFINE_string(prompt, "", "predict: the text a language model's generation starts from (with --generate)");
DEFINE_int32(generate, 0, "predict: tokens a language model generates after --prompt");
DEFINE_double(temperature, 1.0, "predict --generate: sample from p^(1/T) renormalised (0: the most probable token)");
DECLARE_string(checkpoint);  // test.cc
DECLARE_string(out);         // import_onnx.cc
DECLARE_string(input);       // im2rec.cc

namespace frugal::cli {
namespace {

namespace fs = std::filesystem;

// What the model's samples are read as: the source frugal test reads
// (data.val, else data.train), and its vocabulary for a language model.
struct SampleSource {
  const config::DataSource* src = nullptr;  // null: the config has none
  std::string where;                        // "CONFIG: data.val"
  bool text = false;
  Vocabulary vocab;  // text only
};

SampleSource SourceOf(const ConfigFile& cfg) {
  const config::Data& dc = cfg.net.data();
  SampleSource s;
  if (!dc.has_val() && !dc.has_train()) return s;
  s.src = dc.has_val() ? &dc.val() : &dc.train();
  s.where = cfg.path + (dc.has_val() ? ": data.val" : ": data.train");
  s.text = s.src->has_text();
  if (s.text) {
    const config::TextSource& t = s.src->text();
    const std::string& path = t.vocab_path().empty() ? t.path() : t.vocab_path();
    s.vocab = BuildVocabulary(ReadTextFile(path),
                              t.level() == config::TextSource::WORD ? TextLevel::kWord : TextLevel::kChar);
  }
  return s;
}

// A class for printing: the vocabulary's token, quoted and escaped (or
// `token` itself for c < 0), or the index.
std::string ClassName(const SampleSource& s, int64_t c, const std::string& token = "") {
  if (c >= 0 && (!s.text || c >= s.vocab.size())) return std::to_string(c);
  std::string out = "'";
  for (const char ch : c < 0 ? token : s.vocab.tokens[c]) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch == '\'')
      out += "\\'";
    else if (static_cast<unsigned char>(ch) < 32 || static_cast<unsigned char>(ch) >= 127) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned char>(ch));
      out += hex;
    } else {
      out += ch;
    }
  }
  return out + "'";
}

// The model's samples from X, with the note printed about them.
struct Samples {
  std::vector<float> x;
  int64_t n = 0;
  std::string what;  // "3 samples of the .npy"
};

// "1, 28, 28".
std::string Dims(const Shape& s) {
  std::string out;
  for (int64_t d : s.dims()) out += Fmt(out.empty() ? "" : ", ", d);
  return out;
}

std::string JoinNames(std::vector<std::string>::const_iterator begin, std::vector<std::string>::const_iterator end) {
  std::string out;
  for (auto it = begin; it != end; ++it) out += (out.empty() ? "" : ", ") + *it;
  return out;
}

// Token ids must index the vocabulary (what the embedding was trained on).
void CheckTokens(const std::string& path, const SampleSource& s, const std::vector<float>& x) {
  for (size_t k = 0; k < x.size(); ++k)
    FRUGAL_REQUIRE(x[k] >= 0 && x[k] < s.vocab.size() && x[k] == static_cast<int64_t>(x[k]), path, ": value ", x[k],
                   " at flat index ", k, " is not a token id of the vocabulary (0 to ", s.vocab.size() - 1, ", ",
                   s.where, ")");
}

Samples FromNpy(const std::string& path, const Predictor& p, const SampleSource& s) {
  NpyArray a = ReadNpy(path);
  const Shape& sample = p.sample_shape();
  std::vector<int64_t> want{-1};
  want.insert(want.end(), sample.dims().begin(), sample.dims().end());
  bool fits = a.shape.size() == want.size();
  for (size_t k = 1; fits && k < want.size(); ++k) fits = a.shape[k] == want[k];
  FRUGAL_REQUIRE(fits, path, ": shape ", Shape(a.shape), " but the model takes (N, ", Dims(sample),
                 "): N samples of data.sample_shape ", sample, " (save x.reshape(-1, ", Dims(sample), "))");
  FRUGAL_REQUIRE(a.shape[0] > 0, path, ": holds no samples (shape ", Shape(a.shape), ")");
  Samples out;
  out.n = a.shape[0];
  if (a.is_float) {
    out.x = std::move(a.f);
  } else {
    FRUGAL_REQUIRE(s.text, path, ": integer array ('", a.descr, "') but the model's data are float32 values (",
                   s.src ? s.where + " is not text" : "its data are not token ids", "): save x.astype(numpy.float32)");
    out.x.assign(a.i.begin(), a.i.end());
    for (size_t k = 0; k < a.i.size(); ++k)
      FRUGAL_REQUIRE(a.i[k] >= 0 && a.i[k] < s.vocab.size(), path, ": token id ", a.i[k], " at flat index ", k,
                     " is outside the vocabulary (0 to ", s.vocab.size() - 1, ", ", s.where, ")");
  }
  if (s.text && a.is_float) CheckTokens(path, s, out.x);
  out.what = Fmt(out.n, " samples of ", Shape(a.shape), " '", a.descr, "'");
  return out;
}

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// A folder's images (sorted by name), a list of paths (one a line, or a
// .lst's last tab-separated column; relative to the list's folder), or one
// image.
std::vector<std::string> ImagePaths(const std::string& input) {
  std::vector<std::string> paths;
  if (fs::is_directory(input)) {
    for (const auto& e : fs::directory_iterator(input))
      if (e.is_regular_file() && IsImageFile(e.path())) paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    FRUGAL_REQUIRE(!paths.empty(), input, ": the folder holds no .png, .jpg, .jpeg or .bmp images");
    return paths;
  }
  if (IsImageFile(input)) return {input};
  std::ifstream in(input);
  const fs::path dir = fs::path(input).parent_path();
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string path = line.substr(line.find_last_of('\t') == std::string::npos ? 0 : line.rfind('\t') + 1);
    if (path.empty()) continue;
    FRUGAL_REQUIRE(IsImageFile(path), input, ":", lineno, ": '", path.substr(0, 60),
                   "' is not an image path (.png, .jpg, .jpeg or .bmp); --input takes a .npy, a folder of images, "
                   "a list of image paths (one a line) or, for a language model, a text");
    paths.push_back(fs::path(path).is_absolute() ? path : (dir / path).string());
  }
  FRUGAL_REQUIRE(!paths.empty(), input, ": the image list names no images (one path a line)");
  return paths;
}

Samples FromImages(const std::string& input, const Predictor& p, const SampleSource& s) {
  FRUGAL_REQUIRE(s.src, input, ": the config has no data source to say how its images are read");
  Samples out;
  const std::vector<std::string> paths = ImagePaths(input);
  out.n = static_cast<int64_t>(paths.size());
  out.x.resize(out.n * p.sample_shape().Size());
  for (int64_t k = 0; k < out.n; ++k)
    ReadImageSample(*s.src, s.where, p.sample_shape(), paths[k], out.x.data() + k * p.sample_shape().Size());
  out.what = Fmt(out.n, " images, read as ", s.where, " reads them");
  return out;
}

// A text cut into windows of seq_len tokens at multiples of seq_len, as
// the text reader cuts its sequences; the shorter rest is left out.
Samples FromText(const std::string& path, const Predictor& p, const SampleSource& s) {
  const int64_t t = p.sample_shape().Size();
  const std::vector<int64_t> ids = Tokenize(ReadTextFile(path), s.vocab);
  FRUGAL_REQUIRE(static_cast<int64_t>(ids.size()) >= t, path, ": ", ids.size(),
                 " tokens, fewer than one window of seq_len ", t, " (give a longer text, or --prompt with --generate)");
  Samples out;
  out.n = static_cast<int64_t>(ids.size()) / t;
  out.x.assign(ids.begin(), ids.begin() + out.n * t);
  const int64_t unknown = std::count(out.x.begin(), out.x.end(), 0.f);
  out.what = Fmt(out.n, " windows of ", t, " tokens (the last ", ids.size() - out.n * t,
                 " tokens, less than a window, left out; ", unknown, " unknown to the vocabulary read as <unk>, as ",
                 s.where, " reads them)");
  return out;
}

// What --out gets: the one output; several of one shape laid end to end as
// rows (a per-step head's T outputs of (C): (N, T, C); a head per run of K
// steps, n outputs of (K, C): (N, n K, C), the positions in order); else
// the first.
struct Written {
  std::vector<float> y;
  std::vector<int64_t> shape;
  std::string note;
};

// The rows of an output of this shape: its first axis, or 1 for one row.
int64_t RowsOf(const Shape& s) { return s.ndim() >= 2 ? s[0] : 1; }

Written Assemble(const Predictor& p, std::vector<std::vector<float>> outs, int64_t n) {
  const std::vector<Shape>& shapes = p.output_shapes();
  Written w;
  bool same = true;
  for (const Shape& s : shapes) same = same && s == shapes[0];
  w.shape = {n};
  if (shapes.size() == 1 || !same) {
    w.shape.insert(w.shape.end(), shapes[0].dims().begin(), shapes[0].dims().end());
    w.y = std::move(outs[0]);
    if (shapes.size() > 1)
      w.note = Fmt("the graph has ", shapes.size(), " outputs of different shapes; --out holds the first, ",
                   p.output_names()[0],
                   " (the others: ", JoinNames(p.output_names().begin() + 1, p.output_names().end()), ")");
    return w;
  }
  const int64_t outputs = static_cast<int64_t>(shapes.size()), rows = RowsOf(shapes[0]);
  w.shape.push_back(outputs * rows);
  w.shape.insert(w.shape.end(), shapes[0].dims().begin() + (shapes[0].ndim() >= 2 ? 1 : 0), shapes[0].dims().end());
  const int64_t per = shapes[0].Size();
  w.y.resize(n * outputs * per);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t k = 0; k < outputs; ++k)
      std::copy_n(outs[k].begin() + s * per, per, w.y.begin() + (s * outputs + k) * per);
  w.note = Fmt("the graph's ", outputs, " outputs (", p.output_names().front(), " to ", p.output_names().back(), ")",
               rows > 1 ? Fmt(", ", rows, " rows each,") : std::string(), " laid end to end on axis 1");
  return w;
}

// Per sample, the K most probable classes of its last row of classes (a
// sequence model's prediction after the whole window).
void PrintTopK(const Written& w, const SampleSource& s, int64_t k) {
  const int64_t c = w.shape.back();
  const int64_t per = static_cast<int64_t>(w.y.size()) / w.shape[0];
  std::vector<int64_t> order(c);
  for (int64_t i = 0; i < w.shape[0]; ++i) {
    const float* row = w.y.data() + (i + 1) * per - c;
    for (int64_t j = 0; j < c; ++j) order[j] = j;
    const int64_t top = std::min(k, c);
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    std::string line;
    for (int64_t j = 0; j < top; ++j) {
      char prob[32];
      std::snprintf(prob, sizeof(prob), "%.4f", row[order[j]]);
      line += Fmt(j ? "  " : "", ClassName(s, order[j]), " ", prob);
    }
    std::printf("sample %lld: %s\n", static_cast<long long>(i), line.c_str());
  }
}

int PredictInputs(const ConfigFile& cfg, const std::string& checkpoint) {
  FRUGAL_REQUIRE(!FLAGS_out.empty() || FLAGS_top_k > 0,
                 "predict --input needs --out Y.npy (the outputs) or --top-k K (print the K most probable classes)");
  FRUGAL_REQUIRE(fs::exists(FLAGS_input), FLAGS_input, ": no such file or folder (--input)");
  const SampleSource s = SourceOf(cfg);
  Predictor p(cfg, checkpoint);
  const std::string ext = fs::path(FLAGS_input).extension().string();
  const Samples in = ext == ".npy"                              ? FromNpy(FLAGS_input, p, s)
                     : s.text && !fs::is_directory(FLAGS_input) ? FromText(FLAGS_input, p, s)
                                                                : FromImages(FLAGS_input, p, s);
  const auto t0 = std::chrono::steady_clock::now();
  const Written w = Assemble(p, p.Run(in.x.data(), in.n), in.n);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t padded = (p.batch() - in.n % p.batch()) % p.batch();
  std::printf("%s on %s: %s; %lld batch(es) of %lld%s, %.3f s (%.1f samples/s), arena %s\n", checkpoint.c_str(),
              FLAGS_input.c_str(), in.what.c_str(), static_cast<long long>((in.n + p.batch() - 1) / p.batch()),
              static_cast<long long>(p.batch()),
              padded ? Fmt(" (the last filled up with ", padded, " rows of zeros, their outputs dropped)").c_str() : "",
              seconds, in.n / std::max(seconds, 1e-9), HumanBytes(p.plan().arena_bytes).c_str());
  if (!w.note.empty()) std::printf("note: %s\n", w.note.c_str());
  if (!FLAGS_out.empty()) {
    WriteNpy(FLAGS_out, w.shape, w.y.data());
    std::printf("-> %s: float32 %s\n", FLAGS_out.c_str(), Fmt(Shape(w.shape)).c_str());
  }
  if (FLAGS_top_k > 0) PrintTopK(w, s, FLAGS_top_k);
  return 0;
}

// The prompt's token ids; a character (or word) the vocabulary lacks is an
// error naming it.
std::vector<int64_t> PromptTokens(const SampleSource& s) {
  std::vector<int64_t> ids;
  const bool chars = s.vocab.level == TextLevel::kChar;
  std::vector<std::string> tokens;
  if (chars)
    for (const char c : FLAGS_prompt) tokens.emplace_back(1, c);
  std::istringstream words(chars ? "" : FLAGS_prompt);
  for (std::string w; words >> w;) tokens.push_back(w);
  for (size_t k = 0; k < tokens.size(); ++k) {
    const auto id = s.vocab.ids.find(tokens[k]);
    FRUGAL_REQUIRE(id != s.vocab.ids.end() && id->second != 0, "--prompt: ", chars ? "character " : "word ",
                   ClassName(s, -1, tokens[k]),
                   chars ? Fmt(" (byte ", static_cast<int>(static_cast<unsigned char>(tokens[k][0])), ")") : "", " at ",
                   chars ? "position " : "word ", k, " is not in the vocabulary of ", s.where, " (", s.vocab.size() - 1,
                   chars ? " characters" : " words", "); leave it out or replace it");
    ids.push_back(id->second);
  }
  FRUGAL_REQUIRE(!ids.empty(), "--prompt is empty: give the text the generation starts from");
  return ids;
}

// The probabilities at position `pos` of sample 0: the outputs' rows in
// order are the positions (one output of (T, V), T of (V), or n of (T / n, V)).
const float* AtPosition(const Predictor& p, const std::vector<std::vector<float>>& outs, int64_t t, int64_t pos,
                        const std::string& config) {
  const std::vector<Shape>& shapes = p.output_shapes();
  bool rows_of_classes = true;  // every output (classes) or (rows, classes)
  int64_t rows = 0;
  for (const Shape& s : shapes) {
    rows_of_classes = rows_of_classes && (s.ndim() == 1 || s.ndim() == 2);
    rows += RowsOf(s);
  }
  for (size_t k = 0; rows_of_classes && rows == t && k < shapes.size(); ++k) {
    const int64_t r = RowsOf(shapes[k]);
    if (pos < r) return outs[k].data() + pos * shapes[k][shapes[k].ndim() - 1];
    pos -= r;
  }
  throw Error(Fmt(config, ": --generate needs the next-token probabilities at each of the ", t,
                  " positions (outputs whose rows are the positions in order: one of (", t, ", vocab) per sample, ", t,
                  " of (vocab), or n of (", t, " / n, vocab)), but the outputs are ", p.output_names()[0], " ",
                  shapes[0], shapes.size() > 1 ? Fmt(" and ", shapes.size() - 1, " more") : ""));
}

int Generate(const ConfigFile& cfg, const std::string& checkpoint) {
  const SampleSource s = SourceOf(cfg);
  FRUGAL_REQUIRE(s.text, cfg.path, ": --generate needs a language model, whose data are text (",
                 s.src ? s.where + " is not" : "the config has no data source", ")");
  Predictor p(cfg, checkpoint);
  FRUGAL_REQUIRE(p.sample_shape().ndim() == 1, cfg.path, ": data.sample_shape ", p.sample_shape(), " is not [seq_len]");
  const int64_t t = p.sample_shape()[0];
  std::vector<int64_t> ids = PromptTokens(s);
  const int64_t classes = p.output_shapes().back().dims().back();
  // Neither <unk> (id 0) nor a class beyond the vocabulary is drawn.
  std::vector<bool> allowed(classes, false);
  for (int64_t c = 1; c < std::min(classes, s.vocab.size()); ++c) allowed[c] = true;
  const bool words = s.vocab.level == TextLevel::kWord;
  std::printf("%s", FLAGS_prompt.c_str());
  std::fflush(stdout);
  TokenSampler sampler(cfg.net.solver().seed());
  const SampleOptions o{FLAGS_temperature, FLAGS_top_k};
  std::vector<float> x(t);
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < FLAGS_generate; ++k) {
    // The last t tokens at positions 0..; a shorter context is followed by
    // <unk> (id 0), which a causal model's prediction at the last real
    // position never sees.
    const int64_t len = std::min<int64_t>(t, static_cast<int64_t>(ids.size()));
    std::fill(x.begin(), x.end(), 0.f);
    std::copy(ids.end() - len, ids.end(), x.begin());
    const std::vector<std::vector<float>> outs = p.Run(x.data(), 1);
    const int64_t next = sampler.Sample(AtPosition(p, outs, t, len - 1, cfg.path), classes, o, allowed);
    ids.push_back(next);
    const std::string& token = s.vocab.tokens[next];
    std::printf("%s", words ? (token == "<eos>" ? "\n" : " " + token).c_str() : token.c_str());
    std::fflush(stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "\n\n%d tokens in %.2f s: %.1f tokens/s (each runs the whole graph, batch %lld of %lld tokens, on the "
      "last %lld; no key/value cache); seed %llu, temperature %g, top-k %d\n",
      FLAGS_generate, seconds, FLAGS_generate / std::max(seconds, 1e-9), static_cast<long long>(p.batch()),
      static_cast<long long>(t), static_cast<long long>(t), static_cast<unsigned long long>(cfg.net.solver().seed()),
      FLAGS_temperature, FLAGS_top_k);
  return 0;
}

}  // namespace

int Predict() {
  FRUGAL_REQUIRE(!FLAGS_checkpoint.empty(), "predict needs --checkpoint FILE|DIR (the trained model)");
  const bool generate = FLAGS_generate > 0 || !FLAGS_prompt.empty();
  FRUGAL_REQUIRE(generate != !FLAGS_input.empty(),
                 generate ? "predict: give --input X (samples) or --prompt TEXT --generate N (text), not both"
                          : "predict needs --input X (a .npy, images or a text file) or --prompt TEXT --generate N");
  FRUGAL_REQUIRE(!generate || (FLAGS_generate > 0 && !FLAGS_prompt.empty()),
                 "predict: --prompt and --generate N go together (the text to start from, the tokens to add)");
  const std::string checkpoint = ResolveCheckpoint(FLAGS_checkpoint);
  const ConfigFile cfg = LoadConfigFor(checkpoint);
  return generate ? Generate(cfg, checkpoint) : PredictInputs(cfg, checkpoint);
}

}  // namespace frugal::cli
