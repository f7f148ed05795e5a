// Shared pieces of the frugal command-line tool: loading the config named by
// --config with the flag overrides applied.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frugal/config.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/train.h"

namespace frugal::cli {

// Values of every --define (collected before gflags sees argv).
extern std::vector<std::string> g_defines;
// Positional arguments of commands that take them (onnx-test DIR...).
extern std::vector<std::string> g_args;

// Loads --config with the --define values and then `defines` (which win),
// then applies the flags that override config fields (--epochs,
// --max-iters, --batch, --seed, --engine, --engine-workers,
// --engine-kernel-threads, --memory).
ConfigFile LoadConfigFromFlags(const std::vector<std::string>& defines = {});
// The config of a command that reads this checkpoint (test, export-onnx,
// train --resume): --config with its --defines when given, else the config
// the checkpoint holds (CheckpointConfig; a --define is then an error), the
// overrides applied either way.
ConfigFile LoadConfigFor(const std::string& checkpoint);
// The GPU ids of --gpus (none: the CPU); throws Error for a bad list, an id
// named twice or a GPU this machine lacks.
std::vector<int> GpuIdsFromFlags();
// The one device of --gpus (the CPU when it is not given); throws Error as
// GpuIdsFromFlags does, and for several ids.
Device DeviceFromFlags();

// --shard: whether the optimizer state is sharded over the ranks
// (optimizer, ZeRO stage 1); throws Error for another value.
bool ShardOptimizerFromFlags();

int Train();
int Test();
// frugal predict (predict.cc).
int Predict();
int Summary();
int Viz();
int Plan();
// frugal plan --fit SIZE over these strategies (fit.cc).
int PlanFit(const ConfigFile& cfg, const std::vector<MemoryStrategy>& strategies);
// One strategy's panel of frugal plan --timeline (timeline_svg.cc), drawn
// with a point per pixel of its width.
constexpr int kTimelinePoints = 600;
struct TimelinePanel {
  std::string name;
  MemoryTimeline timeline;
  int64_t arena_bytes = 0, lower_bound_bytes = 0;
  int recomputed = 0;
  double extra_flops_percent = 0;
};
// --timeline's file: an Error unless it ends in .svg or .png (timeline.cc).
void CheckTimelinePath(const std::string& path);
// Writes the panels as one SVG or PNG, by path's extension (first every
// strategy on one scale, then one below the other, each on its own scale);
// throws Error if the file cannot be written.
void WriteTimeline(const std::string& path, const std::string& title, const std::vector<TimelinePanel>& panels);
int Time();
int Ops();
int OnnxTest();
int ImportOnnx();
int ExportOnnx();
int ImportMxnet();
int Im2Rec();

}  // namespace frugal::cli
