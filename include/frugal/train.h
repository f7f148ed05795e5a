// Training: the model (train and eval graphs bound to shared parameters)
// and the fit loop. Its building blocks have their own headers, included
// here: rng.h, init.h, optimizer.h, lr_schedule.h, metrics.h (and, not
// included, checkpoint.h, tensorboard.h, trace.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/config.h"
#include "frugal/dist.h"
#include "frugal/engine.h"
#include "frugal/executor.h"
#include "frugal/graph.h"
#include "frugal/init.h"
#include "frugal/io.h"
#include "frugal/lr_schedule.h"
#include "frugal/metrics.h"
#include "frugal/optimizer.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/rng.h"
#include "frugal/tensor.h"

namespace frugal {

// The batch and the shapes of one batch of data and of labels (with the
// batch dim), from the config's data section: what the model and the data
// readers agree on. Throws Error naming the config for a missing or bad
// shape or batch size.
struct DataShapes {
  int64_t batch = 0;
  Shape data, label;
};
DataShapes DataShapesOf(const ConfigFile& cfg);

// A training process's peak resident memory (VmHWM), by part, as planned:
// what limit=SIZE (--memory-limit) bounds.
struct ProcessBytes {
  // Measured as the model is planned: code, libraries, the config, and the
  // data readers' buffers when the data is open (train opens it first;
  // plan does so for a limit).
  int64_t resident = 0;
  int64_t tensors = 0;  // the model's (PlannedFootprint)
  // What running steps adds beyond them: the kernel libraries' buffers
  // and code, the engine's threads, the graphs' and the executor's records
  // (RuntimeBytes).
  int64_t runtime = 0;
  int64_t total() const { return resident + tensors + runtime; }
  // "97.00 MiB = resident 80.00 MiB (code, libraries, data) + tensors ...".
  std::string ToString() const;
};

// The runtime's allowance in ProcessBytes for a training graph: what
// running steps added beyond the resident bytes and the planned tensors on
// the models/ configs (tools/bench/memory_limit.sh, docs/memory.md), as a
// part for the process and a part per node of the graph. The first holds
// the engine's threads and the kernel libraries' buffers (the threaded
// engine's 22 MiB over the naive one's on the char LSTM; on the
// convolutional nets, with oneDNN's primitives, 20 MiB in all on ResNet-56,
// 25 on DenseNet-BC, 35-39 on ResNet-50 at 128x128, batch 4 to 32); the second
// the graphs, plans and the executor's records of each node, and the
// engine's of each op in flight (the char LSTM: 11 MiB at 2,248 nodes, 23
// MiB at 8,968 with the naive engine).
int64_t RuntimeBytes(const Graph& train);

// The graphs a config defines at a batch size: training (forward, gradient,
// shapes) and evaluation (forward, shapes), with their memory plans.
// Optimizer-state sharding (--shard optimizer): this process is rank `rank`
// of `ranks`; 1 rank holds all of it.
struct OptimizerShard {
  int rank = 0, ranks = 1;
};

struct Model {
  Graph train, eval;
  MemoryPlan train_plan, eval_plan;
  Shape data_shape, label_shape;  // with the batch dim
  std::vector<int> params;        // node ids of parameters (same in both graphs)
  std::vector<int> aux;           // node ids of aux state (BatchNorm moving statistics)
  int64_t batch = 0;
  // What a training step does after backward, as graphs of ops
  // (src/train/update_graph.cc). Per update: `update`, rescale_clip over
  // every gradient (iter_size > 1 or clip_gradient) and then one optimizer
  // update node per trained parameter, in name order; its variables are
  // "<param>" (kParam), "<param>/grad" (kInput) and "<param>/<state>"
  // (kState, e.g. "fc1_weight/mom": update_plan.state_bytes). Per
  // micro-batch with iter_size > 1: `accumulate`, grad_accumulate(
  // "<param>/sum", "<param>/grad") per trained parameter (the sums:
  // accumulate_plan.state_bytes); empty otherwise.
  std::string optimizer;  // the rule's name ("sgd", "adam", ...)
  // --shard optimizer: this process is rank shard.rank of shard.ranks and
  // updates, and holds the optimizer state of, only its slice of the
  // trained parameters (SliceAcrossRanks in name order); `slices` holds every
  // rank's slices of each trained parameter. The update graph's variables
  // of a slice that is not a whole parameter are 1-D: "<param>" (a view of
  // the slice), "<param>/grad_slice" and "<param>/<state>"; rescale_clip
  // still reads every whole "<param>/grad".
  OptimizerShard shard;
  std::map<std::string, std::vector<Slice>> slices;
  // This rank's slice of trained parameter `name`, or null.
  const Slice* OwnSlice(const std::string& name) const;
  Graph update, accumulate;
  MemoryPlan update_plan, accumulate_plan;
  ProcessBytes process;  // the process that trains it, at its peak
  DataShapes shapes() const { return {batch, data_shape, label_shape}; }
};
// Throws Error for a config that cannot be planned (shapes, no loss, ...).
// budget=auto and limit=SIZE are resolved for `dev` (ResolveAutoBudget,
// ResolveLimit; their note logged); a limit no plan meets throws Error
// naming the smallest limit that fits and its largest part.
// RequireLoss throws Error naming the config's file when fwd, its forward
// graph, has no loss op to train (BuildModel checks it before planning).
void RequireLoss(const ConfigFile& cfg, const Graph& fwd);
Model BuildModel(const ConfigFile& cfg, const MemoryStrategy& strategy, Device dev = {}, OptimizerShard shard = {});

// What training the model holds on its device, as planned: the arenas
// (train, eval and the update's), parameters and aux state, their
// gradients, the optimizer's state and gradient sums, the data inputs (a
// batch for train and one for eval).
int64_t PlannedFootprint(const Model& m);
// `frugal plan --json`'s object for a model planned under strategy s: the
// train plan's fields (PlanToJson), the optimizer, its state and the
// gradient sums, the update's arena, PlannedFootprint as tensor_bytes, the
// ranks it was planned for (one rank's share: m.shard) and, under a
// limit, the process as planned.
std::string ModelPlanJson(const Model& m, const MemoryStrategy& s, int ranks = 1);

// The largest batch whose process (ProcessBytes: `resident`, measured by
// the caller before it plans anything, PlannedFootprint under strategy s,
// the runtime's allowance) fits `bytes`, found by planning alone (nothing is allocated):
// from batch `start` (the config's), doubled or halved until one batch fits
// and one does not, then bisected. config_at(b) gives the config with batch
// b. A batch whose planning fails (a tensor over kMaxTensorBytes) counts as
// not fitting.
struct BatchFit {
  int64_t batch = 0;     // 0: not even batch 1 fits
  ProcessBytes process;  // at that batch (at batch 1 when none fits)
  int plans = 0;         // models planned by the search
  double ms = 0;         // the search's time
};
BatchFit FitBatch(const std::function<ConfigFile(int64_t batch)>& config_at, int64_t start, const MemoryStrategy& s,
                  int64_t bytes, int64_t resident);

// budget=auto made concrete for a device: the bytes it has free
// (AvailableBytes) less a margin (a tenth, at least 256 MiB, for the
// process itself and the kernel libraries) and less what the model holds
// outside the training arena (PlannedFootprint under share less its train
// arena). Any other strategy is returned as it is. *note gets one line
// saying how the budget was chosen. Throws Error when nothing is left for
// the arena. `shard`: the optimizer state this process holds, as BuildModel.
MemoryStrategy ResolveAutoBudget(const ConfigFile& cfg, const MemoryStrategy& s, Device dev, std::string* note,
                                 OptimizerShard shard = {});
// limit=SIZE made concrete: the training arena's budget is SIZE less the
// rest of the process (*rest): its resident bytes now (`resident`), what
// the model holds outside the training arena (as for budget=auto) and the
// runtime's allowance (RuntimeBytes of share's graph; PlanTraining's plan
// is corrected for its own). Any other strategy is returned as it
// is. CPU only: on a GPU the arena lives in the device's memory (use
// budget=auto).
MemoryStrategy ResolveLimit(const ConfigFile& cfg, const MemoryStrategy& s, Device dev, int64_t resident,
                            ProcessBytes* rest, std::string* note, OptimizerShard shard = {});
// The config's memory strategy (memory.strategy, which --memory sets),
// priced by its cost table (memory.costs) where it names one: the one place
// a run's strategy is parsed. Throws Error for an unknown strategy and
// naming a bad table's file and line.
MemoryStrategy ConfigStrategy(const ConfigFile& cfg);

// The engine the solver names. The threaded engine's split between CPU
// workers and kernel threads, where engine_workers or engine_kernel_threads
// is 0, is chosen for the training graph: two workers where
// TwoWorkersByDefault says so and there are two cores, else one worker with
// every core for its kernels.
std::unique_ptr<Engine> MakeEngineFor(const config::Solver& sc, const Graph& train);
EngineOptions ChooseEngineSplit(const config::Solver& sc, const Graph& train, int cores);
// The CPU workers MakeEngineFor's engine runs a training graph on (1 for
// the naive engine): what the planner places a plan for (PlanTraining).
int CpuWorkersFor(const config::Solver& sc, const Graph& train);

// A table of the graph's nodes (name, op, output shape, inputs; a fused
// pair as "bn1 (+relu1)"), then GraphTotals.
std::string GraphSummary(const Graph& g);
// "57 ops, 272474 parameter values".
std::string GraphTotals(const Graph& g);
// One line: arena, lower bound, parameters, gradients, inputs.
std::string PlanSummary(const MemoryPlan& p, int64_t batch);

struct DataSources;  // below

// An event of a run, as TrainOptions::on_event receives it: a logged
// window ("window"), a validation between epochs ("validation"), an
// epoch's end ("epoch"), each with the line --log-json writes for it (one
// JSON object: epoch, iterations, metrics, speed, memory), and a run
// stopped before its end ("stopped": a signal or on_event; its JSON has
// epoch, batch and iterations).
struct TrainEvent {
  std::string kind;
  std::string json;
};

struct TrainOptions {
  std::string log_json;  // one JSON line per logged interval and per epoch, if set
  // Called with each event of the run on the thread that called Train;
  // true stops the run after the batch under way (the loop runs one
  // ahead of the metrics), checkpointed where a
  // checkpoint directory is set, as a signal does. One process only: Train
  // throws Error for it with dist.comm.
  std::function<bool(const TrainEvent&)> on_event;
  std::string resume;       // a checkpoint file, or a directory (its latest), to continue from
  std::string weights;      // a checkpoint (or a directory: its latest) whose parameters initialise the model by name
  std::string tensorboard;  // a directory for TensorBoard event files
  std::string profile;      // a Chrome trace (JSON) of the ops of the first profile_steps steps
  int profile_steps = 3;
  // Arena poisoning on every CPU executor (Executor::SetPoisoning): slow,
  // for debugging a plan or a kernel.
  bool poison_arena = false;
  // A terminal for the live progress line (the CLI passes stderr when it is
  // one); null: log lines only.
  FILE* progress = nullptr;
  // If set, filled with every parameter's values after training (tests).
  std::map<std::string, std::vector<float>>* final_params = nullptr;
  // If set, runs on this engine instead of making the config's (tests).
  Engine* engine = nullptr;
  // If set, trains and validates on these iterators (val may be null: no
  // validation) instead of the config's data (the Python module's arrays:
  // ArrayIter); they give the config's batch and shapes. One process only.
  DataSources* data = nullptr;
  // Where the model trains: the CPU, or one CUDA device (parameters,
  // gradients, optimizer state and the arena on it; batches staged in pinned
  // host memory and copied on the GPU's stream; outputs copied back for the
  // metrics).
  Device device;
  // Only warnings and errors in the log (the other ranks of an in-process
  // data-parallel run).
  bool quiet = false;
  // Data-parallel across processes when dist.comm is set (frugal/dist.h):
  // each rank reads its shard of the data, parameters start from rank 0's,
  // gradients are averaged over ranks, metrics are reduced over ranks. Only
  // rank 0 should be given log_json, tensorboard, profile and a checkpoint
  // directory.
  DistOptions dist;
};

// Trains the config's model on its data and reports progress and validation
// metrics per epoch. Everything is pushed to the engine the config names:
// per batch the forward and backward ops, then one SGD update per parameter
// (reading its gradient, writing the parameter and its momentum, so it runs
// as soon as that gradient is ready), then the metrics, then the load of the
// next batch on the engine's I/O thread. The loop runs at most one batch
// ahead of the metrics. The solver section chooses the optimizer, the
// learning-rate schedule, clipping, gradient accumulation (iter_size),
// validation and checkpoint intervals; SIGINT and SIGTERM write a checkpoint
// (when a checkpoint directory is set) and stop after the current step.
// Returns the last validation accuracy (or training accuracy without
// validation data).
double Train(const ConfigFile& cfg, const TrainOptions& opts);

// The config's data readers, open: data.train and data.val (null when the
// config has none), reading batches of the config's size and shapes; a
// data-parallel rank reads its shard. Train opens them before it plans the
// model, and `frugal plan` holds them while it plans under limit=SIZE, so
// that the process's resident memory counts the data. Throws Error naming
// the config and the file.
struct DataSources {
  std::unique_ptr<DataIter> train, val;
};
DataSources OpenDataSources(const ConfigFile& cfg, Shard shard = {});
// The data readers a plan of the whole process counts in its resident set
// (`frugal plan` under limit=SIZE, --fit, the Python module's plan). Data
// not there yet (a corpus still to be prepared) is a warning, not an error:
// the plan then counts the process without it.
DataSources OpenDataToPlan(const ConfigFile& cfg);

// What ranks other than 0 keep of a data-parallel run: warnings and errors
// (quiet), no JSON log, events, profile or checkpoints.
void QuietRank(ConfigFile* cfg, TrainOptions* opts);

// Trains one data-parallel rank per communicator, each in a thread of this
// process, rank r on devices[r]; comms come from MakeLocalGroup (CPU), or
// MakeNcclGroup over it (GPUs), with opts.dist's other fields. Rank 0 runs
// with opts, the others with QuietRank. An Error on any rank ends the
// process through that rank's Abort. If params is given, (*params)[r]
// receives rank r's parameters at the end.
void TrainRanksInThreads(const ConfigFile& cfg, const TrainOptions& opts, const std::vector<Communicator*>& comms,
                         const std::vector<Device>& devices,
                         std::vector<std::map<std::string, std::vector<float>>>* params = nullptr);

// Evaluates the config's model with the parameters and aux state of a
// checkpoint on data.val (data.train when the config has no val); returns
// the solver's metrics. Throws Error naming the checkpoint or the data; when
// the checkpoint's tensors do not fit the model, the error also names the
// variables whose values differ from the checkpoint's config (a --define
// left out), as a resume's does.
MetricSet Test(const ConfigFile& cfg, const std::string& checkpoint);

// The variables whose values differ between cfg and `stored`, the config
// text a checkpoint at path holds (the first three, by name), as a hint for
// its tensors that do not fit the model: "the config gives depth=20 but
// PATH was trained with depth=56 (--define depth=56, or leave out --config:
// the checkpoint holds its config)"; "" when they all agree, or the stored
// config has none or does not parse. Values that are $(...) expressions are
// left out: they follow from the others (a ResNet's unit count from its
// depth).
std::string VariableDifference(const ConfigFile& cfg, const std::string& stored, const std::string& path);

// The config a checkpoint was trained with (ConfigAsRun: its --defines
// applied, its paths absolute), to test or resume it without --config.
// Throws Error naming the file when it holds none.
ConfigFile CheckpointConfig(const std::string& checkpoint);

}  // namespace frugal
