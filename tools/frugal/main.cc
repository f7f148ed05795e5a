// frugal: train and inspect networks written as protobuf text configs.
//   frugal train --config models/mlp/fashion_mnist.prototxt
//   frugal plan  --config ... [--memory all] [--json]
//   frugal time  --config ... [--iters N] [--warmup N]
//   frugal ops [--json]
//   frugal onnx-test DIR...
//   frugal import-onnx MODEL.onnx --out PREFIX
//   frugal export-onnx --config ... --checkpoint CKPT --out MODEL.onnx
//   frugal predict --checkpoint CKPT --input X --out Y.npy [--top-k K]
//   frugal predict --checkpoint CKPT --prompt TEXT --generate N [--temperature T] [--top-k K] [--seed S]
//   frugal import-mxnet PREFIX-symbol.json PREFIX-0000.params --out PREFIX [--data-shape 64,1,28,28]
//   frugal im2rec --input DIR|LIST --output PREFIX [--resize N] [--quality Q] [--center-crop]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "cli.h"
#include "frugal/train.h"

DEFINE_string(config, "", "network config (.prototxt)");
// The overrides below apply when given (their defaults are never used).
DEFINE_int32(epochs, -1, "override solver.epochs");
DEFINE_int64(max_iters, -1, "override solver.max_iters (0: no limit)");
DEFINE_int32(batch, -1, "override data.batch_size; import-onnx: the size of a symbolic batch axis (1 when not given)");
DEFINE_int64(seed, -1, "override solver.seed (predict --generate: the seed of its sampling)");
DEFINE_string(engine, "", "override solver.engine (threaded, naive)");
DEFINE_int32(engine_workers, -1,
             "override solver.engine_workers (threaded engine: CPU worker threads; 0: chosen for the graph, 1 or 2)");
DEFINE_int32(engine_kernel_threads, -1,
             "override solver.engine_kernel_threads (threads per kernel; 0: cores / workers)");
DEFINE_string(costs, "",
              "override memory.costs: a cost table from `frugal time --save-costs`; recomputation is priced in "
              "measured time and plans predict the step time");
DEFINE_string(memory, "",
              "override memory.strategy (none, inplace, share, drop_cheap, sqrt, logn, budget=SIZE; 'all' in plan)");
DEFINE_string(memory_limit, "",
              "the whole process's peak resident memory, e.g. 8GiB (data, code and libraries included): the plan "
              "that recomputes least within it; sets memory.strategy to limit=SIZE (CPU)");
DEFINE_double(lr, -1, "override solver.lr");
DEFINE_string(checkpoint_dir, "", "override solver.checkpoint_dir (checkpoints every epoch or checkpoint_interval)");
DEFINE_int64(val_interval, -1, "override solver.val_interval (updates between validations; 0: every epoch)");
DEFINE_int64(val_batches, -1,
             "override solver.val_batches (batches of data.val each validation and test runs; 0: the whole set)");
DEFINE_int64(checkpoint_interval, -1,
             "override solver.checkpoint_interval (updates between checkpoints; 0: every epoch)");
DEFINE_int64(max_nodes, -1, "override max_nodes (the most nodes the config's blocks may expand to)");
DEFINE_string(dtype, "", "override dtype: float32, or bfloat16 (bf16) for mixed precision");
DEFINE_bool(fuse, true, "override fuse: batch_norm + relu pairs run as one op (--nofuse keeps them apart)");
DEFINE_bool(deterministic, false,
            "bit-identical runs: the naive engine with one kernel thread (fixed reduction orders)");

namespace frugal::cli {

std::vector<std::string> g_defines;
std::vector<std::string> g_args;

namespace {
// Set on the command line (each override's range is checked by CheckRanges).
bool Given(const char* flag) { return !gflags::GetCommandLineFlagInfoOrDie(flag).is_default; }
}  // namespace

namespace {

// The flags that override config fields, applied when given.
void ApplyOverrides(ConfigFile* cfg) {
  config::NetConfig& net = cfg->net;
  if (Given("epochs")) net.mutable_solver()->set_epochs(FLAGS_epochs);
  if (Given("max_iters")) net.mutable_solver()->set_max_iters(FLAGS_max_iters);
  if (Given("batch")) net.mutable_data()->set_batch_size(FLAGS_batch);
  if (Given("seed")) net.mutable_solver()->set_seed(FLAGS_seed);
  if (!FLAGS_engine.empty()) net.mutable_solver()->set_engine(FLAGS_engine);
  if (Given("engine_workers")) net.mutable_solver()->set_engine_workers(FLAGS_engine_workers);
  if (Given("engine_kernel_threads")) net.mutable_solver()->set_engine_kernel_threads(FLAGS_engine_kernel_threads);
  if (!FLAGS_memory.empty() && FLAGS_memory != "all") net.mutable_memory()->set_strategy(FLAGS_memory);
  if (!FLAGS_memory_limit.empty()) {
    FRUGAL_REQUIRE(FLAGS_memory.empty(), "--memory-limit ", FLAGS_memory_limit, " and --memory ", FLAGS_memory,
                   ": the limit chooses the plan (the least recomputation within it); give one");
    net.mutable_memory()->set_strategy("limit=" + FLAGS_memory_limit);
  }
  if (!FLAGS_costs.empty()) net.mutable_memory()->set_costs(FLAGS_costs);
  if (Given("lr")) net.mutable_solver()->set_lr(static_cast<float>(FLAGS_lr));
  if (!FLAGS_checkpoint_dir.empty()) net.mutable_solver()->set_checkpoint_dir(FLAGS_checkpoint_dir);
  if (Given("val_interval")) net.mutable_solver()->set_val_interval(FLAGS_val_interval);
  if (Given("val_batches")) net.mutable_solver()->set_val_batches(FLAGS_val_batches);
  if (Given("checkpoint_interval")) net.mutable_solver()->set_checkpoint_interval(FLAGS_checkpoint_interval);
  if (Given("max_nodes")) net.set_max_nodes(FLAGS_max_nodes);
  if (FLAGS_deterministic) net.mutable_solver()->set_deterministic(true);
  if (Given("fuse")) net.set_fuse(FLAGS_fuse);
  if (!FLAGS_dtype.empty()) net.set_dtype(FLAGS_dtype);
  if (net.solver().deterministic()) {
    net.mutable_solver()->set_engine("naive");
    net.mutable_solver()->set_engine_kernel_threads(1);
  }
}

}  // namespace

ConfigFile LoadConfigFromFlags(const std::vector<std::string>& defines) {
  FRUGAL_REQUIRE(!FLAGS_config.empty(), "no config given (use --config FILE)");
  std::vector<std::string> all = g_defines;
  all.insert(all.end(), defines.begin(), defines.end());
  ConfigFile cfg = LoadConfig(FLAGS_config, all);
  ApplyOverrides(&cfg);
  return cfg;
}

ConfigFile LoadConfigFor(const std::string& checkpoint) {
  if (!FLAGS_config.empty()) return LoadConfigFromFlags();
  FRUGAL_REQUIRE(g_defines.empty(), "--define ", g_defines.empty() ? "" : g_defines[0],
                 " without --config: ", checkpoint,
                 " holds its config with the variables it was trained with substituted; give --config "
                 "FILE to set them again");
  ConfigFile cfg = CheckpointConfig(checkpoint);
  ApplyOverrides(&cfg);
  return cfg;
}

}  // namespace frugal::cli

namespace {

using frugal::Error;
using frugal::Fmt;

// Groups of main.cc's config overrides, each standing for its flags in a
// command's list: kModel the model and its plan (--config with --define
// takes it), kEngine how ops run, kTraining the solver's loop. A command
// lists the groups that act on it; --help shows those.
constexpr char kModel[] = "<model flags>";
constexpr char kEngine[] = "<engine flags>";
constexpr char kTraining[] = "<training flags>";
const std::map<std::string, std::vector<std::string>> kGroups = {
    {kModel, {"batch", "config", "costs", "dtype", "fuse", "max_nodes", "memory", "memory_limit"}},
    {kEngine, {"deterministic", "engine", "engine_kernel_threads", "engine_workers"}},
    {kTraining,
     {"checkpoint_dir", "checkpoint_interval", "epochs", "lr", "max_iters", "seed", "val_batches", "val_interval"}},
};

struct Command {
  int (*run)();
  const char* help;
  std::vector<std::string> flags;  // the frugal flags it takes, in help order
  bool takes_args = false;         // positional arguments, in frugal::cli::g_args
};

const std::map<std::string, Command>& Commands() {
  using namespace frugal::cli;
  static const std::map<std::string, Command> commands = {
      {"train",
       {Train,
        "train the config's model on its data",
        {"gpus", kModel, kEngine, kTraining, "dist", "dist_bucket", "dist_check_every", "dist_scale_lr", "dist_timeout",
         "log_json", "poison_arena", "profile", "profile_steps", "progress", "resume", "shard", "tensorboard",
         "weights"}}},
      {"plan",
       {Plan,
        "print the memory plan without training (--fit SIZE: the largest batch that fits)",
        {"fit", kModel, kEngine, "json", "timeline", "explain", "diff", "ranks", "shard"}}},
      {"test",
       {Test,
        "evaluate a checkpoint on its config's validation data: --checkpoint FILE|DIR [--config FILE]",
        {kModel, kEngine, "checkpoint", "val_batches"}}},
      {"predict",
       {Predict,
        "run a checkpoint's inference graph: --checkpoint FILE|DIR --input X (.npy, images, text) --out Y.npy "
        "[--top-k K]; or a language model's text: --prompt TEXT --generate N",
        {kModel, kEngine, "checkpoint", "input", "out", "top_k", "prompt", "generate", "temperature", "seed"}}},
      {"summary", {Summary, "table of the layers: shape, parameters, FLOPs, bytes kept for backward", {kModel}}},
      {"viz", {Viz, "Graphviz dot of the graph, recomputed nodes drawn dashed", {kModel}}},
      {"time",
       {Time,
        "time each op's forward and backward pass and the whole step",
        {"gpus", kModel, kEngine, "data_grad", "iters", "save_costs", "token_data", "warmup"}}},
      {"ops", {Ops, "list the registered ops and what each declares", {"json"}}},
      {"onnx-test",
       {OnnxTest,
        "run ONNX backend tests: frugal onnx-test DIR...",
        {"expect_passed", "inputs_at_run_time", "list_passed", "list_unsupported", "summary"},
        true}},
      {"import-onnx",
       {ImportOnnx,
        "ONNX model to config + checkpoint: MODEL.onnx --out PREFIX [--batch N: for a symbolic batch axis, 1]",
        {"out", "batch", "allow_nonfinite"},
        true}},
      {"export-onnx",
       {ExportOnnx,
        "a checkpoint's inference graph as an ONNX model: --checkpoint FILE|DIR --out MODEL.onnx [--config FILE]",
        {"out", kModel, "checkpoint"}}},
      {"import-mxnet",
       {ImportMxnet,
        "MXNet model to config + checkpoint: PREFIX-symbol.json PREFIX-0000.params --out PREFIX",
        {"data_shape", "out", "allow_nonfinite"},
        true}},
      {"im2rec",
       {Im2Rec,
        "pack images (class folders or a .lst) into a RecordIO .rec and .idx",
        {"center_crop", "encoding", "input", "output", "pass_through", "quality", "resize", "root", "threads"}}},
  };
  return commands;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Takes --config, --define and the overrides of the model.
bool UsesConfig(const Command& c) { return Contains(c.flags, kModel); }

// The command's flags in help order, each group replaced by its flags.
std::vector<std::string> FlagsOf(const Command& c) {
  std::vector<std::string> flags;
  for (const std::string& f : c.flags) {
    const auto group = kGroups.find(f);
    if (group != kGroups.end())
      flags.insert(flags.end(), group->second.begin(), group->second.end());
    else
      flags.push_back(f);
  }
  return flags;
}

// Which commands take a flag, as "'frugal time' or 'frugal train'"; nullopt
// for a flag in no list (glog's), which every command accepts.
std::optional<std::string> FlagOwner(const std::string& flag) {
  std::string owners;
  for (const auto& [name, c] : Commands())
    if (Contains(FlagsOf(c), flag)) owners += (owners.empty() ? "'frugal " : " or 'frugal ") + name + "'";
  if (owners.empty()) return std::nullopt;
  return owners;
}

bool FlagApplies(const std::string& flag, const std::string& cmd) {
  return !FlagOwner(flag) || Contains(FlagsOf(Commands().at(cmd)), flag);
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

void Usage(FILE* out) {
  std::fprintf(out, "usage: frugal COMMAND [ARGS] [flags]\n\ncommands:\n");
  for (const auto& [name, c] : Commands()) std::fprintf(out, "  %-12s %s\n", name.c_str(), c.help);
  std::fprintf(out,
               "\n'frugal COMMAND --help' (or 'frugal help COMMAND') lists the command's flags with their defaults.\n");
}

// Every flag the command takes, with its default.
void CommandHelp(const std::string& cmd) {
  const Command& c = Commands().at(cmd);
  std::printf("usage: frugal %s%s [flags]\n%s\n\nflags (default in brackets):\n", cmd.c_str(),
              c.takes_args ? " ARGS..." : "", c.help);
  for (const std::string& name : FlagsOf(c)) {
    const gflags::CommandLineFlagInfo f = gflags::GetCommandLineFlagInfoOrDie(name.c_str());
    const std::string value = f.type == "string" ? "\"" + f.default_value + "\"" : f.default_value;
    std::printf("  %-26s %s [%s]\n", Dashed(f.name).c_str(), f.description.c_str(), value.c_str());
  }
  if (UsesConfig(c))
    std::printf("  %-26s %s\n", "--define NAME=VALUE", "set a variable the config declares (repeatable)");
  std::printf("\nglog's flags apply too: --v=N (verbose logging), --minloglevel=N, --log_dir=DIR.\n");
}

// A numeric flag's value must be all number, and an int32 one must fit:
// frugal's error line, not gflags' "illegal value".
void CheckNumber(const gflags::CommandLineFlagInfo& f, const std::string& value) {
  const bool whole = f.type == "int32" || f.type == "int64" || f.type == "uint64";
  if (!whole && f.type != "double") return;
  errno = 0;
  char* end = nullptr;
  const double v =
      whole ? static_cast<double>(std::strtoll(value.c_str(), &end, 10)) : std::strtod(value.c_str(), &end);
  const bool fits = errno == 0 && (f.type != "int32" || (v >= INT32_MIN && v <= INT32_MAX));
  FRUGAL_REQUIRE(!value.empty() && *end == '\0' && fits, Dashed(f.name), " '", value, "' is not ",
                 whole ? "a whole number" : "a number", f.type == "int32" ? " of at most 2147483647" : "");
}

// The values each numeric flag takes when given; anything else is an error
// naming the range (a negative --batch was once read as "not set").
struct Range {
  const char* flag;
  double min, max;
};
constexpr double kAny = 9.2e18;  // no bound but int64's
constexpr Range kRanges[] = {
    {"epochs", 1, 1e9},
    {"max_iters", 0, kAny},
    {"batch", 1, 1 << 30},
    {"seed", 0, kAny},
    {"engine_workers", 0, 256},
    {"engine_kernel_threads", 0, 1024},
    {"lr", 0, 1e30},
    {"val_interval", 0, kAny},
    {"val_batches", 0, kAny},
    {"checkpoint_interval", 0, kAny},
    {"profile_steps", 1, 1e6},
    {"iters", 1, 1e9},
    {"warmup", 0, 1e9},
    {"token_data", 0, 1 << 30},
    {"dist_timeout", 1e-3, 1e7},
    {"dist_check_every", 0, kAny},
    {"ranks", 1, 1 << 20},
    {"resize", 0, 1 << 20},
    {"threads", 1, 256},
    {"max_nodes", 1, kAny},
    {"top_k", 0, 1 << 30},
    {"generate", 0, 1e9},
    {"temperature", 0, 1e6},
};

void CheckRanges() {
  for (const Range& r : kRanges) {
    gflags::CommandLineFlagInfo f;
    if (!gflags::GetCommandLineFlagInfo(r.flag, &f) || f.is_default) continue;
    const double v = std::strtod(f.current_value.c_str(), nullptr);
    auto num = [](double x) {
      return x == std::floor(x) && x < 1e15 ? std::to_string(static_cast<int64_t>(x)) : Fmt(x);
    };
    FRUGAL_REQUIRE(v >= r.min && v <= r.max, Dashed(f.name), " ", f.current_value, ": must be ",
                   r.max == kAny ? "at least " + num(r.min) : num(r.min) + " to " + num(r.max));
  }
}

// gflags wants underscores; users write --max-iters. Pulls out every
// --define, which may repeat, and refuses flags the command does not take
// (naming the nearest one it does), so a flag of another command is never
// silently ignored.
std::vector<std::string> NormaliseArgs(const std::string& cmd, int argc, char** argv) {
  std::vector<std::string> out{argv[0]};
  const bool uses_config = UsesConfig(Commands().at(cmd));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (uses_config && (a == "--define" || a == "-define")) {
      if (i + 1 >= argc) throw Error("--define needs name=value");
      frugal::cli::g_defines.push_back(argv[++i]);
      continue;
    }
    if (uses_config && a.rfind("--define=", 0) == 0) {
      frugal::cli::g_defines.push_back(a.substr(9));
      continue;
    }
    out.push_back(a);
    if (a.size() < 2 || a[0] != '-' || a == "--") continue;
    const size_t dashes = a[1] == '-' ? 2 : 1, eq = a.find('=');
    std::string name = a.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    std::replace(name.begin(), name.end(), '-', '_');
    out.back() = std::string(dashes, '-') + name + (eq == std::string::npos ? "" : a.substr(eq));
    gflags::CommandLineFlagInfo f;
    bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &f);
    if (!known && name.rfind("no", 0) == 0 && gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &f))
      known = f.type == "bool";  // --nofoo
    if (!known || !FlagApplies(f.name, cmd)) {
      const std::string best = frugal::Nearest(name, FlagsOf(Commands().at(cmd)));
      std::string why = " is not a flag of 'frugal " + cmd + "'";
      if (known) why = " is a flag of " + *FlagOwner(f.name) + ", not of 'frugal " + cmd + "'";
      throw Error(Fmt(Dashed(name), why, best.empty() ? "" : " (did you mean " + Dashed(best) + "?)", "; 'frugal ", cmd,
                      " --help' lists its flags"));
    }
    if (f.type == "bool") continue;
    if (eq != std::string::npos) {
      CheckNumber(f, a.substr(eq + 1));
    } else if (i + 1 < argc) {
      out.push_back(argv[++i]);  // the value
      CheckNumber(f, out.back());
    }
  }
  return out;
}

}  // namespace

// OpenMP's threads spin after each parallel region by default (libgomp:
// about 300,000 iterations), holding cores that the engine's other worker,
// oneDNN's kernels and the I/O thread need: an MLP epoch on the naive
// engine took 3x as long on a loaded machine. libgomp reads its wait policy
// once, when it is loaded, so frugal sets OMP_WAIT_POLICY=PASSIVE and
// starts itself again, unless the user chose (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT set). If the exec fails, frugal goes on as it is.
void PassiveOpenMpWaits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char** argv) {
  PassiveOpenMpWaits(argv);
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv[0]);
  gflags::SetUsageMessage("frugal COMMAND [ARGS] [flags]");
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  const std::string first = argv[1];
  try {
    if (first == "help" || first == "--help" || first == "-h") {
      if (argc < 3)
        Usage(stdout);
      else if (Commands().count(argv[2]))
        CommandHelp(argv[2]);
      else
        throw Error(Fmt("no command '", argv[2], "' to help with ('frugal help' lists the commands)"));
      return 0;
    }
    auto cmd = Commands().find(first);
    if (cmd == Commands().end()) {
      std::vector<std::string> names;
      for (const auto& [name, c] : Commands()) names.push_back(name);
      const std::string best = frugal::Nearest(first, names);
      throw Error(Fmt("unknown command '", first, "'", best.empty() ? "" : " (did you mean '" + best + "'?)",
                      "; 'frugal help' lists the commands"));
    }
    for (int i = 2; i < argc; ++i)
      if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
        CommandHelp(first);
        return 0;
      }
    std::vector<std::string> args = NormaliseArgs(first, argc - 1, argv + 1);
    std::vector<char*> ptrs;
    for (std::string& a : args) ptrs.push_back(a.data());
    int n = static_cast<int>(ptrs.size());
    char** p = ptrs.data();
    gflags::ParseCommandLineFlags(&n, &p, true);
    CheckRanges();
    if (n > 1 && !cmd->second.takes_args) throw Error(Fmt("unexpected argument '", p[1], "'"));
    frugal::cli::g_args.assign(p + 1, p + n);
    return cmd->second.run();
  } catch (const Error& e) {
    std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // a library's (protobuf, oneDNN, the standard library's): still one line
    std::fprintf(stderr, "frugal: error: %s (unexpected here: please report it with the command)\n", e.what());
    return 1;
  }
}
