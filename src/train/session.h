// Everything bound for one run: the model, its engine, the parameters
// (ParamSet), aux state, the train, eval and update executors, the batch
// each of train and eval reads (BatchInputs), and the engine variables that
// order every access to them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frugal/checkpoint.h"
#include "frugal/train.h"
#include "train/param_set.h"

namespace frugal {

// A batch as one executor reads it: data and label on the session's device,
// bound to that executor, and their engine variables. A feed (feed.h) loads
// batches into it and scores the executor's outputs against its label.
struct BatchInputs {
  Tensor data, label;
  Var data_var = -1, label_var = -1;
};

struct Session {
  // Runs on `given`, or on an engine of its own when it is null. shard:
  // the slice of the optimizer state this process holds (Model::shard).
  Session(const ConfigFile& cfg, const MemoryStrategy& strategy, Engine* given, Device device,
          OptimizerShard shard = {});
  ~Session();

  bool on_gpu() const { return dev.type == DeviceType::kCUDA; }
  Var NewVar();
  // Pushes fn where the model runs: on a CPU worker with a null context, or
  // on the GPU's stream with its LaunchAsync context (backend/device.h), the
  // variables released when the GPU has done the work.
  void PushOn(std::function<void(cuda::Context* cuda)> fn, const std::vector<Var>& reads,
              const std::vector<Var>& writes, const char* name);
  // Everything a checkpoint holds (host copies, views on the CPU) but the
  // optimizer state, which OptState gives. The engine must be idle.
  CheckpointState State(const ConfigFile& cfg, int64_t epoch, int64_t iteration, int64_t position) const;
  // The optimizer state by checkpoint name ("<param>/<state>"), whole, on
  // the host. With --shard optimizer every rank calls it (dp: the run's)
  // and rank 0 gets every rank's slices put together; the others get an
  // empty map. The engine must be idle.
  std::map<std::string, Tensor> OptState(DataParallel* dp) const;
  // This process's part of a checkpoint's whole optimizer state (by
  // checkpoint name): with --shard optimizer, views of its slices; the
  // states of slices it does not own are left out. Entries that do not
  // match a trained parameter stay as they are, for RestoreTensors to name.
  std::map<std::string, Tensor> OwnPart(std::map<std::string, Tensor> whole) const;
  // --shard optimizer: the trained parameters with every rank's slices,
  // made whole after each update (DataParallel::PushGather).
  std::vector<SlicedTensor> SlicedParams() const;

  Model model;
  std::unique_ptr<Engine> owned_engine;
  Engine* engine = nullptr;
  std::unique_ptr<Optimizer> opt;
  Rng rng;
  Device dev;  // where the model runs
  ParamSet params;
  std::map<std::string, Tensor> aux;  // BatchNorm moving statistics
  std::unique_ptr<Executor> train;
  BatchInputs train_inputs;  // the batch train reads
  // The eval executor over its own batch, eval_inputs: both bound (the
  // arena and the batch allocated) when first asked for, so a run without
  // validation data never holds them (Train binds them at the start of a
  // run that validates). Loading an eval batch never touches the training
  // batch, whatever the order of the pushes.
  Executor& Eval();
  BatchInputs eval_inputs;
  const Executor* eval_if_bound() const { return eval_.get(); }
  // Arena poisoning (Executor::SetPoisoning) for every executor, the eval
  // one included when it is bound later.
  void SetPoisoning(bool on);
  // What a step runs after backward (Model::update, Model::accumulate):
  // update once per update, accumulate (iter_size > 1, else null) once per
  // micro-batch.
  std::unique_ptr<Executor> update, accumulate;

 private:
  // A parameter or aux tensor on dev, initialised on the host from the
  // session's generator (the same values on every device).
  Tensor Initialised(const Node& n, const Shape& shape);
  // Parameter `id` of the model, bound into b.
  void AddParam(int id, int iter_size, Bindings* b);
  // A batch of the model's data and label shapes on dev, bound into b.
  BatchInputs BindInputs(Bindings* b);
  void BindUpdates();

  const std::string data_name_, label_name_;  // the config's names of the inputs
  std::vector<Var> vars_;                     // every engine variable made here
  Bindings bound_;  // what the train executor was bound to: Eval() binds the same parameters and aux state
  std::unique_ptr<Executor> eval_;
  bool poison_ = false;
};

// The bytes of every arena the session's executors allocated (train, eval
// where bound, and the update graphs': clipping's workspace).
int64_t ArenaBytes(const Session& s);

// Host copies of tensors on a GPU (the tensors themselves on the CPU). The
// engine must be idle.
std::map<std::string, Tensor> OnHost(const std::map<std::string, Tensor>& ts);

// The first float32 value of host tensors `ts` (by name, then index) that is
// NaN or infinite, as "fc1_weight[12] = nan"; empty when all are finite.
std::string FirstNonFinite(const std::map<std::string, Tensor>& ts);
// "fc1_weight (1.2e+29)": the value of largest magnitude in host tensors
// `ts`, with its tensor.
std::string LargestMagnitude(const std::map<std::string, Tensor>& ts);

// Waits for the engine when the scope is left by an exception, so that no
// pushed function outlives the locals it points to.
class DrainOnUnwind {
 public:
  explicit DrainOnUnwind(Engine* e) : engine_(e), exceptions_(std::uncaught_exceptions()) {}
  ~DrainOnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) WaitAllNoThrow(engine_);
  }

 private:
  Engine* engine_;
  int exceptions_;
};

}  // namespace frugal
