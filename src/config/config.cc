#include "frugal/config.h"

#include <glog/logging.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/blocks.h"
#include "config/expr.h"

namespace frugal {
namespace {

namespace pb = google::protobuf;

// The enum field of this name in the config's messages (nullptr: none).
const pb::EnumDescriptor* EnumOfField(const pb::Descriptor* d, const std::string& field) {
  for (int k = 0; k < d->field_count(); ++k) {
    const pb::FieldDescriptor* f = d->field(k);
    if (f->name() == field && f->enum_type()) return f->enum_type();
  }
  for (int k = 0; k < d->nested_type_count(); ++k)
    if (const pb::EnumDescriptor* e = EnumOfField(d->nested_type(k), field)) return e;
  return nullptr;
}

const pb::EnumDescriptor* EnumOfField(const std::string& field) {
  const pb::FileDescriptor* file = config::NetConfig::descriptor()->file();
  for (int k = 0; k < file->message_type_count(); ++k)
    if (const pb::EnumDescriptor* e = EnumOfField(file->message_type(k), field)) return e;
  return nullptr;
}

// Protobuf's `Unknown enumeration value of "Adam" for field "optimizer".`
// as the field's values and the nearest one; other messages as they are.
std::string WithEnumValues(const std::string& message) {
  static const std::regex unknown("Unknown enumeration value of \"([^\"]*)\" for field \"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(message, m, unknown)) return message;
  const pb::EnumDescriptor* e = EnumOfField(m[2].str());
  if (!e) return message;
  std::vector<std::string> values;
  std::string list;
  for (int k = 0; k < e->value_count(); ++k) {
    values.push_back(e->value(k)->name());
    list += (k ? ", " : "") + values.back();
  }
  std::string upper = m[1].str();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::string best = Nearest(upper, values);
  return Fmt(m[2].str(), ": '", m[1].str(), "' is not one of ", list,
             best.empty() ? "" : Fmt(" (did you mean ", best, "?)"));
}

// Collects the first parse error as "path:line:col: message".
class FirstError : public pb::io::ErrorCollector {
 public:
  explicit FirstError(std::string path) : path_(std::move(path)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (error_.empty()) error_ = Fmt(path_, ":", line + 1, ":", column + 1, ": ", WithEnumValues(message));
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

// Line and column (1-based) of a byte offset in text.
std::pair<int, int> LineCol(const std::string& text, size_t pos) {
  int line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// A bound on a config after substitution: variables that each expand
// another tenfold would otherwise fill the memory.
constexpr size_t kMaxConfigChars = size_t{64} << 20;

// The names of the ${name}s in text.
std::vector<std::string> VariablesIn(const std::string& text) {
  std::vector<std::string> names;
  for (size_t open = text.find("${"); open != std::string::npos; open = text.find("${", open + 2)) {
    const size_t close = text.find('}', open);
    if (close == std::string::npos) break;  // Substitute names the error
    names.push_back(text.substr(open + 2, close - open - 2));
  }
  return names;
}

// Replaces every ${name}; lookup returns nullptr for an unknown name.
template <typename Lookup>
std::string Substitute(const std::string& text, const std::string& path, Lookup lookup) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("${", pos);
    if (open == std::string::npos) break;
    size_t close = text.find('}', open);
    auto at = [&] {  // only for an error: finding the line is linear in the text
      auto [line, col] = LineCol(text, open);
      return Fmt(path, ":", line, ":", col);
    };
    const size_t newline = text.find('\n', open);
    FRUGAL_REQUIRE(close != std::string::npos && (newline == std::string::npos || newline > close), at(),
                   ": '${' without a closing '}' on the same line");
    std::string name = text.substr(open + 2, close - open - 2);
    const std::string* value = lookup(name);
    FRUGAL_REQUIRE(value, at(), ": unknown variable '", name, "' (declare it: variable { name: \"", name,
                   "\" value: \"...\" })");
    out.append(text, pos, open - pos).append(*value);
    FRUGAL_REQUIRE(out.size() <= kMaxConfigChars, path, ": substituting ${", name, "} makes the text more than ",
                   kMaxConfigChars, " characters (variables that expand each other many times over?)");
    pos = close + 1;
  }
  return out.append(text, pos, std::string::npos);
}

// Pass 1 text: ${...} and $(...) outside quoted strings (in number fields)
// read as 0; inside strings they stay, so variable values keep their
// references.
std::string Placeholders(const std::string& text) {
  std::string out;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (comment) {
      comment = c != '\n';
    } else if (quote) {
      if (c == '\\') {
        out += c;
        c = text[++i];
      } else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      comment = true;
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      size_t close = text.find('}', i);
      if (close != std::string::npos) {
        out += '0';
        i = close;
        continue;
      }
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      int depth = 0;
      size_t close = i + 1;
      for (; close < text.size() && text[close] != '\n'; ++close) {
        if (text[close] == '(') ++depth;
        if (text[close] == ')' && --depth == 0) break;
      }
      if (close < text.size() && text[close] == ')') {
        out += '0';
        i = close;
        continue;
      }
    }
    out += c;
  }
  return out;
}

config::NetConfig Parse(const std::string& text, const std::string& path, pb::TextFormat::ParseInfoTree* tree) {
  config::NetConfig net;
  pb::TextFormat::Parser parser;
  FirstError errors(path);
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree);
  if (!parser.ParseFromString(text, &net)) {
    throw Error(errors.error().empty() ? path + ": cannot parse the config" : errors.error());
  }
  return net;
}

// solver.max_iter, the old name of lr_schedule_iters (one letter from
// max_iters, when the run stops): read into lr_schedule_iters with a warning
// line; both set is an error.
void ReadDeprecatedNames(ConfigFile* cfg, const pb::TextFormat::ParseInfoTree& tree) {
  if (!cfg->net.has_solver() || !cfg->net.solver().has_max_iter()) return;
  const pb::TextFormat::ParseInfoTree* solver =
      tree.GetTreeForNested(config::NetConfig::descriptor()->FindFieldByName("solver"), -1);
  const int line =
      solver ? solver->GetLocation(config::Solver::descriptor()->FindFieldByName("max_iter"), -1).line + 1 : 0;
  const std::string where = line > 0 ? Fmt(cfg->path, ":", line) : cfg->path;
  config::Solver* s = cfg->net.mutable_solver();
  FRUGAL_REQUIRE(!s->has_lr_schedule_iters(), where, ": solver sets max_iter ", s->max_iter(),
                 " and lr_schedule_iters ", s->lr_schedule_iters(),
                 ", which are one field (max_iter is its old name): keep lr_schedule_iters");
  LOG(WARNING) << where << ": solver.max_iter is deprecated: rename it lr_schedule_iters (the length of the POLY or "
               << "COSINE schedule; max_iters is when the run stops)";
  s->set_lr_schedule_iters(s->max_iter());
  s->clear_max_iter();
}

// A solver field the chosen optimizer does not read (momentum with ADAM) is
// most likely meant for another one: one warning line each, naming the line.
void WarnIgnoredSolverFields(const ConfigFile& cfg, const pb::TextFormat::ParseInfoTree& tree) {
  if (!cfg.net.has_solver()) return;
  const config::Solver& s = cfg.net.solver();
  using S = config::Solver;
  struct Use {
    const char* field;
    std::vector<S::Optimizer> by;
  };
  static const Use kUses[] = {
      {"momentum", {S::SGD, S::NESTEROV}},      {"beta1", {S::ADAM, S::ADAMW}}, {"beta2", {S::ADAM, S::ADAMW}},
      {"eps", {S::ADAM, S::ADAMW, S::RMSPROP}}, {"rho", {S::RMSPROP}},          {"centered", {S::RMSPROP}},
  };
  const pb::Descriptor* d = S::descriptor();
  const pb::Reflection* r = s.GetReflection();
  const pb::TextFormat::ParseInfoTree* solver =
      tree.GetTreeForNested(config::NetConfig::descriptor()->FindFieldByName("solver"), -1);
  const std::string name = S::Optimizer_Name(s.optimizer());
  std::string reads;
  for (const Use& u : kUses)
    if (std::count(u.by.begin(), u.by.end(), s.optimizer())) reads += Fmt(reads.empty() ? "" : ", ", u.field);
  for (const Use& u : kUses) {
    const pb::FieldDescriptor* f = d->FindFieldByName(u.field);
    if (!r->HasField(s, f) || std::count(u.by.begin(), u.by.end(), s.optimizer())) continue;
    const int line = solver ? solver->GetLocation(f, -1).line + 1 : 0;
    LOG(WARNING) << (line > 0 ? Fmt(cfg.path, ":", line) : cfg.path) << ": solver." << u.field
                 << " is ignored: optimizer " << name << " reads " << reads
                 << " and weight_decay (remove it, or choose the optimizer it is for)";
  }
}

}  // namespace

// Protobuf builds the default of a string field (solver.engine "threaded",
// memory.strategy, data.data_name and label_name) on its first read, under
// a lock that ThreadSanitizer cannot see inside Debian's uninstrumented
// libprotobuf: two rank threads reading solver.engine for the first time at
// once were reported as a race. Reading each default once while a config is
// parsed, before any thread of a run starts, leaves only plain reads after.
namespace {
void BuildStringDefaults() {
  static const bool built = [] {
    const config::NetConfig& d = config::NetConfig::default_instance();
    return !d.data().data_name().empty() && !d.data().label_name().empty() && !d.solver().engine().empty() &&
           !d.memory().strategy().empty();
  }();
  (void)built;
}
}  // namespace

namespace {

// --define name=value over the declared variables' values.
void ApplyDefines(ConfigFile* cfg, const std::vector<std::string>& defines) {
  for (const std::string& d : defines) {
    size_t eq = d.find('=');
    FRUGAL_REQUIRE(eq != std::string::npos && eq > 0, "--define '", d, "': expected name=value");
    std::string name = d.substr(0, eq);
    if (!cfg->values.count(name)) {
      std::string list;
      for (const auto& [k, v] : cfg->values) list += (list.empty() ? "" : ", ") + k;
      throw Error(Fmt("--define ", d, ": ", cfg->path, " declares no variable '", name,
                      "' (declared: ", list.empty() ? "none" : list, ")"));
    }
    cfg->values[name] = d.substr(eq + 1);
  }
}

// Values may use other variables: each is resolved once, after those it
// uses (a depth-first walk on an explicit stack, linear in the values' size
// however long the chains; a cycle is an error).
void ResolveVariables(ConfigFile* cfg) {
  const std::string& path = cfg->path;
  auto lookup = [&](const std::string& n) -> const std::string* {
    auto it = cfg->values.find(n);
    return it == cfg->values.end() ? nullptr : &it->second;
  };
  std::map<std::string, int> state;  // absent: not yet, 1: on the walk's path, 2: resolved
  for (const auto& [root, unused] : cfg->values) {
    std::vector<std::pair<std::string, bool>> stack{{root, false}};  // name, its uses pushed
    while (!stack.empty()) {
      auto& [name, pushed] = stack.back();
      int& st = state[name];
      if (st == 2) {
        stack.pop_back();
      } else if (!pushed) {
        FRUGAL_REQUIRE(st == 0, path, ": variable '", name, "' refers to itself through other variables");
        st = 1;
        pushed = true;
        for (const std::string& used : VariablesIn(cfg->values.at(name)))
          if (cfg->values.count(used) && state[used] != 2) stack.push_back({used, false});
      } else {
        std::string& value = cfg->values.at(name);
        value = Substitute(value, Fmt(path, ": variable '", name, "'"), lookup);
        st = 2;
        stack.pop_back();
      }
    }
  }
}

// Integer expressions expanded, line by line so errors name the line.
std::string ExpandLines(const std::string& text, const std::string& path) {
  std::string expanded;
  size_t start = 0;
  for (int line = 1; start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    expanded += ExpandExprs(text.substr(start, end - start), Fmt(path, ":", line));
    if (end < text.size()) expanded += '\n';
    start = end + 1;
  }
  return expanded;
}

// Each require's `that` (expanded) is a nonzero integer, else its message.
void CheckRequires(const ConfigFile& cfg, const pb::TextFormat::ParseInfoTree& tree) {
  const pb::FieldDescriptor* require_field = config::NetConfig::descriptor()->FindFieldByName("require");
  for (int k = 0; k < cfg.net.require_size(); ++k) {
    const config::Require& r = cfg.net.require(k);
    const std::string where = Fmt(cfg.path, ":", tree.GetLocation(require_field, k).line + 1);
    char* end = nullptr;
    const long long v = std::strtoll(r.that().c_str(), &end, 10);
    FRUGAL_REQUIRE(!r.that().empty() && *end == '\0', where, ": require's that is '", r.that(),
                   "', not an integer (write a $(...) expression of the variables)");
    FRUGAL_REQUIRE(v != 0, where, ": ", r.message().empty() ? "a requirement does not hold" : r.message());
  }
}

// Where each node and each block's node is written, for errors.
void RecordLocations(ConfigFile* cfg, const pb::TextFormat::ParseInfoTree& tree) {
  const std::string& path = cfg->path;
  const pb::FieldDescriptor* node_field = config::NetConfig::descriptor()->FindFieldByName("node");
  for (int k = 0; k < cfg->net.node_size(); ++k) {
    pb::TextFormat::ParseLocation loc = tree.GetLocation(node_field, k);
    cfg->node_locs.push_back({path, loc.line + 1, loc.column + 1});
  }
  const pb::FieldDescriptor* block_field = config::NetConfig::descriptor()->FindFieldByName("block");
  const pb::FieldDescriptor* block_node = config::Block::descriptor()->FindFieldByName("node");
  for (int b = 0; b < cfg->net.block_size(); ++b) {
    const pb::TextFormat::ParseInfoTree* sub = tree.GetTreeForNested(block_field, b);
    cfg->block_node_locs.emplace_back();
    for (int k = 0; k < cfg->net.block(b).node_size(); ++k) {
      pb::TextFormat::ParseLocation loc = sub ? sub->GetLocation(block_node, k) : pb::TextFormat::ParseLocation();
      cfg->block_node_locs.back().push_back({path, loc.line + 1, loc.column + 1});
    }
  }
}

}  // namespace

ConfigFile ParseConfig(const std::string& text, const std::string& path, const std::vector<std::string>& defines) {
  BuildStringDefaults();
  ConfigFile cfg;
  cfg.path = path;
  // Pass 1: find the declared variables.
  pb::TextFormat::ParseInfoTree tree1;
  config::NetConfig declared = Parse(Placeholders(text), path, &tree1);
  for (const auto& v : declared.variable()) {
    FRUGAL_REQUIRE(!v.name().empty(), path, ": a variable has no name");
    cfg.values[v.name()] = v.value();
  }
  ApplyDefines(&cfg, defines);
  ResolveVariables(&cfg);
  // Pass 2: the real values.
  const std::string final_text = Substitute(text, path, [&](const std::string& name) -> const std::string* {
    auto it = cfg.values.find(name);
    return it == cfg.values.end() ? nullptr : &it->second;
  });
  pb::TextFormat::ParseInfoTree tree;
  cfg.net = Parse(ExpandLines(final_text, path), path, &tree);
  FRUGAL_REQUIRE(cfg.net.version() == 1, path, ": config version ", cfg.net.version(),
                 " is not supported (write 'version: 1' at the top)");
  ReadDeprecatedNames(&cfg, tree);
  WarnIgnoredSolverFields(cfg, tree);
  CheckRequires(cfg, tree);
  RecordLocations(&cfg, tree);
  return cfg;
}

ConfigFile LoadConfig(const std::string& path, const std::vector<std::string>& defines) {
  FRUGAL_REQUIRE(!std::filesystem::is_directory(path), path,
                 ": is a directory; give a config file (e.g. models/mlp/fashion_mnist.prototxt)");
  std::ifstream in(path);
  FRUGAL_REQUIRE(in, path, ": cannot open the config file (check the path)");
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path, defines);
}

std::vector<std::string*> DataPaths(config::DataSource* src) {
  std::vector<std::string*> paths;
  auto add = [&](bool has, std::string* p) {
    if (has && !p->empty()) paths.push_back(p);
  };
  if (src->has_idx()) {
    config::IdxSource* s = src->mutable_idx();
    add(s->has_images(), s->mutable_images());
    add(s->has_labels(), s->mutable_labels());
  }
  if (src->has_cifar())
    for (std::string& p : *src->mutable_cifar()->mutable_path()) add(true, &p);
  if (src->has_recordio()) {
    config::RecordIOSource* s = src->mutable_recordio();
    add(s->has_path(), s->mutable_path());
    add(s->has_index(), s->mutable_index());
  }
  if (src->has_text()) {
    config::TextSource* s = src->mutable_text();
    add(s->has_path(), s->mutable_path());
    add(s->has_vocab_path(), s->mutable_vocab_path());
  }
  return paths;
}

std::string ConfigAsRun(const ConfigFile& cfg) {
  config::NetConfig net = cfg.net;
  for (config::Variable& v : *net.mutable_variable()) {
    auto it = cfg.values.find(v.name());
    if (it != cfg.values.end()) v.set_value(it->second);
  }
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  auto absolute = [&](std::string* p) {
    if (!ec && !p->empty() && (*p)[0] != '/') *p = (cwd / *p).lexically_normal().string();
  };
  if (net.has_data() && net.data().has_train())
    for (std::string* p : DataPaths(net.mutable_data()->mutable_train())) absolute(p);
  if (net.has_data() && net.data().has_val())
    for (std::string* p : DataPaths(net.mutable_data()->mutable_val())) absolute(p);
  if (net.has_memory() && net.memory().has_costs()) absolute(net.mutable_memory()->mutable_costs());
  if (net.has_solver() && net.solver().has_checkpoint_dir()) absolute(net.mutable_solver()->mutable_checkpoint_dir());
  std::string text;
  pb::TextFormat::PrintToString(net, &text);
  return text;
}

std::string QuoteConfigString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace frugal
