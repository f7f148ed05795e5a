// frugal: train and inspect networks written as protobuf text configs.
//   frugal train --config models/mlp/fashion_mnist.prototxt
//   frugal plan  --config ... [--memory all] [--json]
//   frugal time  --config ... [--iters N] [--warmup N]
//   frugal ops [--json]
//   frugal onnx-test DIR...
//   frugal import-onnx MODEL.onnx --out PREFIX
//   frugal im2rec --input DIR|LIST --output PREFIX [--resize N] [--quality Q] [--center-crop]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "cli.h"

DEFINE_string(config, "", "network config (.prototxt)");
DEFINE_int32(epochs, -1, "override solver.epochs");
DEFINE_int64(max_iters, -1, "override solver.max_iters (0: no limit)");
DEFINE_int32(batch, -1, "override data.batch_size");
DEFINE_int64(seed, -1, "override solver.seed");
DEFINE_string(engine, "", "override solver.engine (threaded, naive)");
DEFINE_int32(engine_workers, -1,
             "override solver.engine_workers (threaded engine: CPU worker threads; 0: min(2, cores))");
DEFINE_int32(engine_kernel_threads, -1,
             "override solver.engine_kernel_threads (threads per kernel; 0: cores / workers)");
DEFINE_string(memory, "",
              "override memory.strategy (none, inplace, share, drop_cheap, sqrt, logn, budget=SIZE; 'all' in plan)");
DEFINE_double(lr, -1, "override solver.lr");
DEFINE_string(checkpoint_dir, "", "override solver.checkpoint_dir (checkpoints every epoch or checkpoint_interval)");
DEFINE_bool(deterministic, false,
            "bit-identical runs: the naive engine with one kernel thread (fixed reduction orders)");

namespace frugal::cli {

std::vector<std::string> g_defines;
std::vector<std::string> g_args;

ConfigFile LoadConfigFromFlags() {
  FRUGAL_REQUIRE(!FLAGS_config.empty(), "no config given (use --config FILE)");
  ConfigFile cfg = LoadConfig(FLAGS_config, g_defines);
  config::NetConfig& net = cfg.net;
  if (FLAGS_epochs >= 0) net.mutable_solver()->set_epochs(FLAGS_epochs);
  if (FLAGS_max_iters >= 0) net.mutable_solver()->set_max_iters(FLAGS_max_iters);
  if (FLAGS_batch >= 0) net.mutable_data()->set_batch_size(FLAGS_batch);
  if (FLAGS_seed >= 0) net.mutable_solver()->set_seed(FLAGS_seed);
  if (!FLAGS_engine.empty()) net.mutable_solver()->set_engine(FLAGS_engine);
  if (FLAGS_engine_workers >= 0) net.mutable_solver()->set_engine_workers(FLAGS_engine_workers);
  if (FLAGS_engine_kernel_threads >= 0) net.mutable_solver()->set_engine_kernel_threads(FLAGS_engine_kernel_threads);
  if (!FLAGS_memory.empty() && FLAGS_memory != "all") net.mutable_memory()->set_strategy(FLAGS_memory);
  if (FLAGS_lr >= 0) net.mutable_solver()->set_lr(static_cast<float>(FLAGS_lr));
  if (!FLAGS_checkpoint_dir.empty()) net.mutable_solver()->set_checkpoint_dir(FLAGS_checkpoint_dir);
  if (FLAGS_deterministic) net.mutable_solver()->set_deterministic(true);
  if (net.solver().deterministic()) {
    net.mutable_solver()->set_engine("naive");
    net.mutable_solver()->set_engine_kernel_threads(1);
  }
  return cfg;
}

}  // namespace frugal::cli

namespace {

struct Command {
  int (*run)();
  const char* help;
  bool takes_args = false;  // positional arguments, in frugal::cli::g_args
};

const std::map<std::string, Command>& Commands() {
  static const std::map<std::string, Command> commands = {
      {"train", {frugal::cli::Train, "train the config's model on its data"}},
      {"plan", {frugal::cli::Plan, "print the memory plan without training"}},
      {"test", {frugal::cli::Test, "evaluate a checkpoint on the config's validation data: --checkpoint FILE"}},
      {"summary", {frugal::cli::Summary, "table of the layers: shape, parameters, FLOPs, bytes kept for backward"}},
      {"viz", {frugal::cli::Viz, "Graphviz dot of the graph, recomputed nodes drawn dashed"}},
      {"time", {frugal::cli::Time, "time each op's forward and backward pass and the whole step"}},
      {"ops", {frugal::cli::Ops, "list the registered ops and what each declares"}},
      {"onnx-test", {frugal::cli::OnnxTest, "run ONNX backend tests: frugal onnx-test DIR...", true}},
      {"import-onnx", {frugal::cli::ImportOnnx, "ONNX model to config + params: MODEL.onnx --out PREFIX", true}},
      {"im2rec", {frugal::cli::Im2Rec, "pack images (class folders or a .lst) into a RecordIO .rec and .idx"}},
  };
  return commands;
}

void Usage(FILE* out) {
  std::fprintf(out, "usage: frugal COMMAND [ARGS] [flags]\n\ncommands:\n");
  for (const auto& [name, c] : Commands()) std::fprintf(out, "  %-12s %s\n", name.c_str(), c.help);
  std::fprintf(out, "\n'frugal COMMAND --helpshort' lists the flags.\n");
}

// gflags wants underscores; users write --max-iters. Also pulls out every
// --define, which may repeat.
std::vector<std::string> NormaliseArgs(int argc, char** argv) {
  std::vector<std::string> out{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--define" || a == "-define") {
      if (i + 1 >= argc) throw frugal::Error("--define needs name=value");
      frugal::cli::g_defines.push_back(argv[++i]);
      continue;
    }
    if (a.rfind("--define=", 0) == 0) {
      frugal::cli::g_defines.push_back(a.substr(9));
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      size_t end = a.find('=');
      for (size_t k = 2; k < std::min(end, a.size()); ++k)
        if (a[k] == '-') a[k] = '_';
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv[0]);
  gflags::SetUsageMessage("frugal COMMAND [ARGS] [flags]");
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto cmd = Commands().find(argv[1]);
  if (cmd == Commands().end()) {
    std::fprintf(stderr, "frugal: unknown command '%s'\n", argv[1]);
    Usage(stderr);
    return 2;
  }
  try {
    std::vector<std::string> args = NormaliseArgs(argc - 1, argv + 1);
    std::vector<char*> ptrs;
    for (std::string& a : args) ptrs.push_back(a.data());
    int n = static_cast<int>(ptrs.size());
    char** p = ptrs.data();
    gflags::ParseCommandLineFlags(&n, &p, true);
    if (n > 1 && !cmd->second.takes_args) throw frugal::Error(frugal::Fmt("unexpected argument '", p[1], "'"));
    frugal::cli::g_args.assign(p + 1, p + n);
    return cmd->second.run();
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "frugal: error: %s\n", e.what());
    return 1;
  }
}
