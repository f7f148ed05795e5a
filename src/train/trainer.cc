// The fit loop: bind the model (Session), choose how batches arrive at the
// train and eval executors (a Feed each), then per epoch push each batch's
// Step, validate where it is due and tell the observers (observer.h) at
// fixed points what was measured: logging, checkpoints, events and signals
// are theirs. See Train in frugal/train.h for how the pushes overlap.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "frugal/checkpoint.h"
#include "frugal/io.h"
#include "frugal/train.h"
#include "train/feed.h"
#include "train/observer.h"
#include "train/session.h"
#include "train/step.h"

namespace frugal {
namespace {

// The training and validation iterators: the caller's (TrainOptions::data)
// or the config's, opened (a data-parallel rank reads its rows of every
// global batch: frugal/io.h, Shard); and the batches per epoch, the same on
// every rank.
struct TrainData {
  DataSources owned;  // the config's, where the caller gives none
  DataIter* train = nullptr;
  DataIter* val = nullptr;
  int64_t batches = 0;
};

TrainData OpenData(const ConfigFile& cfg, const TrainOptions& opts, Shard shard) {
  TrainData d;
  if (opts.data) {
    FRUGAL_REQUIRE(opts.data->train, cfg.path, ": TrainOptions::data has no training data");
    d.train = opts.data->train.get();
    d.val = opts.data->val.get();
  } else {
    d.owned = OpenDataSources(cfg, shard);
    d.train = d.owned.train.get();
    d.val = d.owned.val.get();
  }
  LOG_IF(INFO, !opts.quiet) << "data: " << d.train->Describe() << (d.val ? "; validation: " + d.val->Describe() : "")
                            << "; batch " << cfg.net.data().batch_size();
  d.batches = d.train->batches_per_epoch();
  return d;
}

// Every rank reads the same data: the rows of each global batch.
// Every rank must train the same model: ranks of different models would
// exchange buckets of different sizes (an MPI error, or a hang). Each rank
// lists what the model is (batch, dtype, strategy, optimizer, iter_size, and
// every parameter's name and shape, in name order); the ranks compare a
// hash of the list, then, where that differs, of each entry, and every rank
// stops naming the first that differs and its own value there.
void CheckRanksModel(const ConfigFile& cfg, const Session& s, DataParallel* dp) {
  std::vector<std::string> facts = {Fmt("batch ", s.model.batch),
                                    Fmt("dtype ", cfg.net.dtype()),
                                    Fmt("memory strategy ", s.model.train_plan.strategy.Name()),
                                    Fmt("optimizer ", s.opt->name()),
                                    Fmt("iter_size ", cfg.net.solver().iter_size()),
                                    s.model.shard.ranks > 1 ? "--shard optimizer" : "no --shard"};
  for (const auto& [name, t] : s.params.Values()) facts.push_back(Fmt("parameter ", name, " ", t.shape().ToString()));
  auto hash = [](const std::string& text, uint64_t h = 1469598103934665603ull) {  // FNV-1a
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h;
  };
  uint64_t all = hash(Fmt(facts.size()));
  for (const std::string& f : facts) all = hash(f, all);
  Communicator* comm = dp->comm();
  const std::vector<uint64_t> whole = comm->AllGather(all, "the model's digest");
  if (std::all_of(whole.begin(), whole.end(), [&](uint64_t h) { return h == whole[0]; })) return;
  uint64_t most = 0;
  for (uint64_t n : comm->AllGather(facts.size(), "the model's entries")) most = std::max(most, n);
  for (size_t k = 0; k < most; ++k) {
    const std::string mine = k < facts.size() ? facts[k] : "no more parameters";
    const std::vector<uint64_t> h = comm->AllGather(hash(mine), "an entry of the model");
    std::string differ;
    for (size_t r = 0; r < h.size(); ++r) differ += h[r] != h[0] ? Fmt(differ.empty() ? "" : ", ", r) : "";
    const bool one = differ.find(',') == std::string::npos;
    FRUGAL_REQUIRE(differ.empty(), cfg.path, ": the ranks train different models: rank ", dp->rank(), " has ", mine,
                   " where rank", one ? " " : "s ", differ, one ? " differs" : " differ",
                   " from rank 0; every rank must run the same config with the same --defines and flags");
  }
}

void CheckRanksData(const ConfigFile& cfg, const TrainData& d, DataParallel* dp, int64_t batch, bool quiet) {
  const int64_t n = d.train->num_samples();
  FRUGAL_REQUIRE(dp->Min(n) == n, cfg.path, ": data.train: rank ", dp->rank(), " reads ", n,
                 " samples but another rank fewer: every rank must read the same data (each takes its rows of "
                 "every global batch of the same shuffled order)");
  LOG_IF(INFO, !quiet) << dp->Describe() << "; global batch " << batch * dp->size() << ", " << d.batches
                       << " batches per epoch";
}

// Where a resumed run continues.
struct Resumed {
  std::string path;  // the checkpoint
  int64_t epoch = 0, iteration = 0, data_position = 0;
  int64_t micro = 0;              // micro-batches of the update in progress
  int64_t lr_schedule_iters = 0;  // the schedule's length the run started with (0: none stored)
};

// restore(), its Error (tensors that do not fit the model) naming the
// variables that differ from the checkpoint's config: a forgotten --define.
template <typename Fn>
void RestoreNamingTheConfig(const ConfigFile& cfg, const CheckpointState& c, const std::string& path, Fn restore) {
  try {
    restore();
  } catch (const Error& e) {
    // Before version 3 the stored variables are the declared ones, not the run's.
    const std::string hint = c.version >= 3 ? VariableDifference(cfg, c.config_text, path) : "";
    if (hint.empty()) throw;
    throw Error(Fmt(e.what(), "; ", hint));
  }
}

// Restores a checkpoint into the session (saying so unless quiet: the
// other ranks of a run in threads).
Resumed Resume(Session* s, const ConfigFile& cfg, const std::string& where, int64_t batches, int iter_size,
               bool quiet) {
  const std::string path = ResolveCheckpoint(where);
  CheckpointState c = LoadCheckpoint(path);
  FRUGAL_REQUIRE(c.optimizer == s->opt->name(), path, ": the checkpoint was written by optimizer ", c.optimizer,
                 " but the config uses ", s->opt->name());
  RestoreNamingTheConfig(cfg, c, path, [&] {
    RestoreTensors(c.params, s->params.Values(), "parameters", path);
    RestoreTensors(c.aux, s->aux, "aux state", path);
  });
  RestoreTensors(s->OwnPart(c.opt_state), NamedStates(*s->opt, s->params.States()), "optimizer state", path);
  s->rng.Load(c.rng_state);
  // Inside an epoch the data continues at a batch: at another batch size
  // that batch starts at another sample, and samples would be trained twice
  // or never.
  if (c.data_position > 0 && !c.config_text.empty()) {
    const int64_t was = ParseConfig(c.config_text, path + " (its config)", {}).net.data().batch_size();
    const int64_t now = cfg.net.data().batch_size();
    FRUGAL_REQUIRE(was == now, path, ": the checkpoint stopped inside epoch ", c.epoch, " after batch ",
                   c.data_position, " of ", was, " samples; this run's batch is ", now,
                   ", which would train some samples twice and skip others. Resume with --batch ", was,
                   ", or from a checkpoint at an epoch's end");
  }
  // Written inside an accumulation: its sums, and how many micro-batches
  // they hold (every epoch before has all its batches).
  int64_t micro = 0;
  if (!c.grad_sums.empty()) {
    // Checked arithmetic: the fields are not range-checked yet (Start does).
    int64_t seen = 0, summed = 0;
    const bool overflow = __builtin_mul_overflow(c.epoch, batches, &seen) ||
                          __builtin_add_overflow(seen, c.data_position, &seen) ||
                          __builtin_mul_overflow(c.iteration, int64_t{iter_size}, &summed) ||
                          __builtin_sub_overflow(seen, summed, &micro);
    FRUGAL_REQUIRE(!overflow && micro > 0 && micro < iter_size, path,
                   ": the checkpoint holds gradient sums of an update in progress but epoch ", c.epoch, ", batch ",
                   c.data_position, " and iteration ", c.iteration, " do not put one there with iter_size ", iter_size,
                   " and ", batches, " batches per epoch: it is not a checkpoint of this config and data");
    RestoreTensors(c.grad_sums, s->params.Sums(), "gradient sums", path);
  }
  LOG_IF(INFO, !quiet) << "resumed from " << path << ": epoch " << c.epoch << ", iteration " << c.iteration
                       << ", batch " << c.data_position
                       << (micro > 0 ? Fmt(", ", micro, " of ", iter_size, " micro-batches summed") : "");
  return {path, c.epoch, c.iteration, c.data_position, micro, c.lr_schedule_iters};
}

// Where the run starts: --weights, --resume (r's epoch and iteration; returns
// where it resumed, with the batches of that epoch already used), and rank
// 0's values on every rank.
Resumed Start(Run* r) {
  Session& s = r->s;
  if (!r->opts.weights.empty()) {
    std::map<std::string, Tensor> model_tensors = s.params.Values();
    model_tensors.insert(s.aux.begin(), s.aux.end());
    const std::string path = ResolveCheckpoint(r->opts.weights);
    LOG_IF(INFO, !r->opts.quiet) << LoadWeights(path, model_tensors).ToString(path);
  }
  Resumed at;
  if (!r->opts.resume.empty()) {
    at = Resume(&s, r->cfg, r->opts.resume, r->batches, r->iter_size, r->opts.quiet);
    FRUGAL_REQUIRE(at.epoch >= 0 && at.epoch <= r->sc.epochs() && at.iteration >= 0 &&
                       at.iteration < (int64_t{1} << 53) / r->iter_size && at.data_position >= 0 &&
                       at.data_position <= r->batches && at.lr_schedule_iters >= 0,
                   r->opts.resume, ": the checkpoint says epoch ", at.epoch, ", iteration ", at.iteration, ", batch ",
                   at.data_position, ", schedule length ", at.lr_schedule_iters,
                   ", which this run cannot continue from (", r->sc.epochs(), " epochs of ", r->batches,
                   " batches): it is not a checkpoint of this config and data");
    r->epoch = at.epoch;
    r->iter = at.iteration * r->iter_size + at.micro;
  }
  if (r->dp) {
    std::map<std::string, Tensor> values = s.params.Values();
    r->dp->Broadcast(&values, "broadcast(parameters)");
    r->dp->Broadcast(&s.aux, "broadcast(aux state)");
  }
  return at;
}

// The learning-rate schedule. A POLY or COSINE schedule runs over
// solver.lr_schedule_iters updates; without it, over the updates of the run
// that started it: a resumed run continues its checkpoint's length (another
// --max-iters or epochs would otherwise restart the schedule mid-run, the
// rate jumping), a new run or a checkpoint without one takes this run's.
LrSchedule Schedule(const config::Solver& sc, int64_t run_updates, const Resumed& at, const std::string& path) {
  const int64_t stored = at.lr_schedule_iters;
  const LrSchedule lr = LrScheduleFromConfig(sc, stored > 0 ? stored : run_updates, path);
  if (lr.Length() == 0 || stored == 0) return lr;
  if (lr.Length() != stored) {
    LOG(WARNING) << path << ": solver.lr_schedule_iters " << lr.Length() << " replaces the schedule of " << stored
                 << " updates that " << at.path << " was trained on: the learning rate changes at the resume";
  } else if (stored != run_updates) {
    LOG(WARNING) << "the learning rate continues the schedule of " << stored << " updates that " << at.path
                 << " was trained on, not one of this run's " << run_updates
                 << (run_updates > stored ? " (past its end it stays at its last rate)" : "")
                 << "; set solver.lr_schedule_iters for another length";
  }
  return lr;
}

// The observers TrainOptions and the solver ask for, in the order they are
// called (the order of the log lines they print).
std::vector<std::unique_ptr<Observer>> Observers(Run& r) {
  const TrainOptions& o = r.opts;
  // Made first: its directory is created before the others open their files.
  std::unique_ptr<Observer> checkpoints = MakeCheckpoints(r.sc, o.resume);
  std::vector<std::unique_ptr<Observer>> v;
  if (o.progress) v.push_back(MakeProgressLine());
  if (!o.quiet) v.push_back(MakeLogLines());
  if (!o.tensorboard.empty()) v.push_back(MakeTensorBoard(o.tensorboard));
  if (!o.profile.empty()) v.push_back(MakeProfile(r));
  if (!o.log_json.empty()) v.push_back(MakeJsonLog(o.log_json));
  if (o.on_event) v.push_back(MakeEventCallback(o.on_event));
  v.push_back(MakeSignalStop());
  v.push_back(std::move(checkpoints));
  return v;
}

// Where batches come from and go: an iterator and the feed that loads its
// batches into one executor's inputs.
struct Source {
  DataIter* it = nullptr;
  Feed* feed = nullptr;
};

// The loop: epochs of batches, each batch one Step, validation where it is
// due, the observers told where the run is and what it measured.
class Fit {
 public:
  // val.it: null when the run does not validate.
  Fit(Run* r, std::vector<std::unique_ptr<Observer>> observers, Step* step, const LrSchedule& lr, Source train,
      Source val)
      : r_(*r),
        observers_(std::move(observers)),
        step_(*step),
        lr_(lr),
        train_(train),
        val_(val),
        window_m_(r->metrics),
        display_(std::max(1, r->sc.display())) {}

  void Epochs(int64_t skip) {
    for (; r_.epoch < r_.sc.epochs() && !r_.done && !r_.stop; ++r_.epoch, skip = 0) {
      StartEpoch(skip);
      for (int64_t b = skip; b < r_.batches; ++b)
        if (!Batch()) break;
      if (!EndEpoch()) break;
    }
  }

  // The end of the run, the engine idle.
  void End() {
    Tell([&](Observer& o) { o.OnEnd(r_); });
  }

  // The last validation's accuracy, or the last epoch's training accuracy
  // where that came later (0 when there is neither).
  double accuracy() const { return accuracy_; }

 private:
  template <typename F>
  void Tell(F f) {
    for (auto& o : observers_) f(*o);
  }

  // Resuming inside an epoch: the batches already used are read and dropped.
  void StartEpoch(int64_t skip) {
    r_.epoch_start = window_start_ = Clock::now();
    r_.epoch_m.Reset();
    window_m_.Reset();
    window_ = {};
    untimed_samples_ = epoch_samples_ = 0;
    r_.batch = r_.first_batch = window_first_ = skip;
    rate_ = static_cast<float>(lr_.At(r_.updates()));
    train_.it->Reset(r_.epoch);
    train_.feed->Skip(train_.it, skip);
    if (r_.batch < r_.batches) train_.feed->PushLoad(train_.it, -1);
  }

  // One batch; false when the run ends after it (max_iters, r.stop).
  bool Batch() {
    Tell([&](Observer& o) { o.OnBatchBegin(r_); });
    // The schedule's rate for the update this batch ends, if it ends one.
    if ((r_.iter + 1) % r_.iter_size == 0) rate_ = static_cast<float>(lr_.At(r_.updates()));
    step_.Push(r_.iter, rate_);
    // The previous batch's metrics: the loop stays at most one batch ahead.
    r_.s.engine->WaitForVar(train_.feed->metrics_var());
    r_.CheckFinite(r_.iter - 1, rate_);
    if (r_.batch == r_.first_batch + 1) {  // the epoch's first batch is in: the speed is timed from here
      window_start_ = window_.last_in;
      untimed_samples_ = window_.samples;
    }
    ReportWindow();
    Tell([&](Observer& o) { o.OnMetrics(r_, rate_); });
    train_.feed->PushMetrics({&r_.epoch_m, &window_m_}, &window_);
    ++r_.batch;
    ++r_.iter;
    step_.CheckRanks(r_.iter);
    if (r_.sc.max_iters() > 0 && r_.iter >= r_.sc.max_iters()) {
      r_.done = true;
      return false;
    }
    // The next batch loads while the observers run and a validation
    // evaluates: validation loads into the eval executor's own inputs.
    if (r_.batch < r_.batches) train_.feed->PushLoad(train_.it, -1);
    Tell([&](Observer& o) { o.OnBatchEnd(r_); });
    if (r_.stop) return false;
    if (!r_.updated()) return true;
    if (val_.it && r_.sc.val_interval() > 0 && r_.updates() % r_.sc.val_interval() == 0) Validate(false);
    Tell([&](Observer& o) { o.OnUpdate(r_, rate_); });
    return !r_.stop;  // set by an observer of the validation or the update
  }

  // False when the run stopped (r.stop).
  bool EndEpoch() {
    r_.s.engine->WaitAll();
    r_.CheckFinite(r_.iter - 1, rate_);
    r_.progress.Clear();
    ReportWindow(/*last=*/true);
    if (r_.stop) {
      Tell([&](Observer& o) { o.OnStop(r_, rate_); });
      return false;
    }
    EpochEnd e;
    e.secs = Seconds(r_.epoch_start);
    e.train = r_.Reduce(r_.epoch_m);
    e.samples = r_.Sum(epoch_samples_);
    e.lr = rate_;
    if (e.train.Has("accuracy")) accuracy_ = e.train.Get("accuracy");
    // Every epoch (val_interval 0), or at the end of a run whose last
    // update fell between two intervals.
    const bool last_epoch = r_.done || r_.epoch + 1 == r_.sc.epochs();
    if (val_.it && (r_.sc.val_interval() == 0 || (last_epoch && validated_at_ != r_.iter))) e.val = Validate(true);
    Tell([&](Observer& o) { o.OnEpochEnd(r_, e); });
    return true;
  }

  // Validation on data.val, its metrics over every rank told to every observer.
  MetricValues Validate(bool epoch_end) {
    validated_at_ = r_.iter;
    r_.AverageAcrossRanks();
    const MetricValues m = r_.Reduce(Evaluate(&r_.s, val_.feed, val_.it, r_.sc));
    r_.progress.Clear();
    Tell([&](Observer& o) { o.OnValidation(r_, m, epoch_end); });
    if (m.Has("accuracy")) accuracy_ = m.Get("accuracy");
    return m;
  }

  // The metrics of batches [0, r.batch) are in: reports the window
  // [window_first_, r.batch) if it ends at a multiple of display or is an
  // epoch's (or the run's) last.
  void ReportWindow(bool last = false) {
    if (r_.batch == window_first_ || (r_.batch % display_ != 0 && !last)) return;
    r_.progress.Clear();
    Window w;
    w.first = window_first_;
    w.metrics = r_.Reduce(window_m_);
    const int64_t timed = r_.Sum(window_.samples - untimed_samples_);
    const double secs = std::chrono::duration<double>(window_.last_in - window_start_).count();
    w.samples_per_s = timed > 0 && secs > 0 ? static_cast<double>(timed) / secs : -1;
    w.lr = rate_;
    Tell([&](Observer& o) { o.OnWindow(r_, w); });
    window_m_.Reset();
    epoch_samples_ += window_.samples;
    window_.samples = untimed_samples_ = 0;
    window_start_ = window_.last_in;
    window_first_ = r_.batch;
  }

  Run& r_;
  const std::vector<std::unique_ptr<Observer>> observers_;
  Step& step_;
  const LrSchedule& lr_;
  const Source train_, val_;
  // The rate of the last update pushed, or, before this epoch's first, the
  // one it will use.
  float rate_ = 0;
  double accuracy_ = 0;
  int64_t validated_at_ = -1;  // the iteration of the last validation
  // The window of `display` batches, [window_first_, r.batch). Filled by
  // pushed functions: read after the loop's wait.
  MetricSet window_m_;
  WindowTally window_;
  int64_t window_first_ = 0;
  // The speed of a window is timed from when the batch before it was in to
  // when its last batch was in (each when its metrics ran: with the naive
  // engine, which runs a step at push time, timing at the loop's wait
  // counted one step too few in an epoch's last window).
  // An epoch's first batch has none: its metrics need only its forward
  // pass, before the pipeline has filled, so timing from the epoch's start
  // read up to 4x too fast (MXNet's Speedometer skips its first window
  // likewise). Its samples are left out of the first window's speed.
  int64_t untimed_samples_ = 0;
  int64_t epoch_samples_ = 0;  // of the windows reported this epoch: every sample by its end
  Clock::time_point window_start_;
  const int display_;
};

void LogMemory(const Session& s) {
  const Model& m = s.model;
  const int64_t update = m.update_plan.arena_bytes + m.accumulate_plan.arena_bytes;  // clipping's partial sums
  // The eval arena is planned always, allocated only for a run that validates.
  const int64_t eval = s.eval_if_bound() ? m.eval_plan.arena_bytes : 0;
  const int64_t planned = m.train_plan.arena_bytes + eval + update;
  const int64_t measured = MemoryAccounting::Get().Current(s.dev, MemKind::kArena);
  const int64_t sums = m.accumulate_plan.state_bytes;
  // The batches train and eval read, each its own (eval's, like its arena,
  // only where a validation runs).
  auto bytes = [](const BatchInputs& in) { return in.data.bytes() + in.label.bytes(); };
  const int64_t train_batch = bytes(s.train_inputs), eval_batch = s.eval_if_bound() ? bytes(s.eval_inputs) : 0;
  LOG(INFO) << "memory: arenas allocated " << HumanBytes(measured) << " (planned " << HumanBytes(planned) << ": train "
            << HumanBytes(m.train_plan.arena_bytes)
            << (eval > 0 ? " + eval " + HumanBytes(eval)
                         : Fmt(" (eval ", HumanBytes(m.eval_plan.arena_bytes), " not allocated: no validation ran)"))
            << (update > 0 ? " + update " + HumanBytes(update) : "") << "), inputs "
            << HumanBytes(train_batch + eval_batch)
            << (eval_batch > 0 ? Fmt(" (train ", HumanBytes(train_batch), " + eval ", HumanBytes(eval_batch), ")") : "")
            << ", " << m.optimizer << " state " << HumanBytes(m.update_plan.state_bytes)
            << (sums > 0 ? " + gradient sums " + HumanBytes(sums) : "") << ", peak of all tensors "
            << HumanBytes(MemoryAccounting::Get().Peak(s.dev)) << ", process peak " << HumanBytes(ProcessPeakBytes())
            << " (planned " << m.process.ToString()
            << (m.train_plan.strategy.limit() ? ", under " + m.train_plan.strategy.Name() : "") << ")";
}

// The solver's counts and clipping in range, and its metrics known: Train
// fails on them before anything runs.
void CheckSolver(const ConfigFile& cfg) {
  const config::Solver& sc = cfg.net.solver();
  MetricSet probe(MetricNames(sc));
  FRUGAL_REQUIRE(sc.epochs() >= 1, cfg.path, ": solver.epochs must be at least 1, got ", sc.epochs());
  FRUGAL_REQUIRE(sc.max_iters() >= 0, cfg.path, ": solver.max_iters must be at least 0 (0: no limit), got ",
                 sc.max_iters());
  FRUGAL_REQUIRE(sc.display() >= 0, cfg.path,
                 ": solver.display must be at least 0 (batches between progress lines; 0: every batch), got ",
                 sc.display());
  FRUGAL_REQUIRE(sc.val_interval() >= 0, cfg.path,
                 ": solver.val_interval must be at least 0 (0: after every epoch), got ", sc.val_interval());
  FRUGAL_REQUIRE(sc.val_batches() >= 0, cfg.path, ": solver.val_batches must be at least 0 (0: the whole set), got ",
                 sc.val_batches());
  FRUGAL_REQUIRE(sc.checkpoint_interval() >= 0, cfg.path,
                 ": solver.checkpoint_interval must be at least 0 (0: after every epoch), got ",
                 sc.checkpoint_interval());
  FRUGAL_REQUIRE(sc.keep_checkpoints() >= 0, cfg.path, ": solver.keep_checkpoints must be at least 0 (0: all), got ",
                 sc.keep_checkpoints());
  FRUGAL_REQUIRE(sc.iter_size() >= 1, cfg.path, ": solver.iter_size must be at least 1, got ", sc.iter_size());
  FRUGAL_REQUIRE(sc.clip_gradient() >= 0 && std::isfinite(sc.clip_gradient()), cfg.path,
                 ": solver.clip_gradient must be a number >= 0 (0: no clipping), got ", sc.clip_gradient());
}

// The slice of the optimizer state this rank holds (--shard optimizer:
// data-parallel on the CPU only).
OptimizerShard OptimizerShardOf(const DistOptions& d) {
  if (!d.shard_optimizer) return {};
  FRUGAL_REQUIRE(d.comm, "--shard optimizer shards the optimizer state over the ranks of a data-parallel run: add ",
                 "--dist mpi and start it with mpirun -np N");
  FRUGAL_REQUIRE(!d.comm->device_buffers(),
                 "--shard optimizer: not built for parameters on GPUs (NCCL) yet; train on the CPU or leave it out");
  return {d.comm->rank(), d.comm->size()};
}

// "--shard optimizer: rank R updates K of P parameter values and holds
// their optimizer state (BYTES)".
std::string DescribeShard(const Model& m) {
  int64_t own = 0, all = 0;
  for (const auto& [name, slices] : m.slices)
    for (const Slice& sl : slices) {
      all += sl.size;
      if (sl.owner == m.shard.rank) own += sl.size;
    }
  return Fmt("--shard optimizer: rank ", m.shard.rank, " updates ", own, " of ", all,
             " parameter values and holds their optimizer state (", HumanBytes(m.update_plan.state_bytes), ")");
}

}  // namespace

DataSources OpenDataSources(const ConfigFile& cfg, Shard shard) {
  const config::Data& dc = cfg.net.data();
  const DataShapes shapes = DataShapesOf(cfg);
  DataSources d;
  d.train = LoadSource(cfg, dc.train(), "train", shapes, dc.shuffle(), shard);
  if (dc.has_val()) d.val = LoadSource(cfg, dc.val(), "val", shapes, /*shuffle=*/false, shard);
  return d;
}

DataSources OpenDataToPlan(const ConfigFile& cfg) {
  try {
    return OpenDataSources(cfg);
  } catch (const Error& e) {
    LOG(WARNING) << "the process is planned without its data, which did not open: " << e.what();
    return {};
  }
}

double Train(const ConfigFile& cfg, const TrainOptions& opts) {
  const config::Solver& sc = cfg.net.solver();
  const MemoryStrategy strategy = ConfigStrategy(cfg);
  CheckSolver(cfg);
  FRUGAL_REQUIRE((!opts.on_event && !opts.data) || !opts.dist.comm,
                 "event callbacks and the caller's data (TrainOptions::on_event, data) are for one process's run: "
                 "not a data-parallel one");
  const Shard shard = opts.dist.comm ? Shard{opts.dist.comm->rank(), opts.dist.comm->size()} : Shard{};
  const OptimizerShard opt_shard = OptimizerShardOf(opts.dist);
  // The data first: the process's resident memory, which limit=SIZE counts
  // when the model is planned, then holds it.
  TrainData data = OpenData(cfg, opts, shard);
  Session s(cfg, strategy, opts.engine, opts.device, opt_shard);
  s.SetPoisoning(opts.poison_arena);
  std::unique_ptr<Feed> feed = MakeFeed(&s, *s.train, s.train_inputs);
  std::unique_ptr<DataParallel> dp;
  if (opts.dist.comm) {
    dp = std::make_unique<DataParallel>(opts.dist, *s.train, s.params.Grads(), s.params.GradVars(), s.params.Sums());
    s.train->SetDataPart(dp->rank());  // this rank's dropout masks: its rows of the global batch
    CheckRanksModel(cfg, s, dp.get());
    CheckRanksData(cfg, data, dp.get(), s.model.batch, opts.quiet);
  }
  if (opt_shard.ranks > 1) LOG_IF(INFO, !opts.quiet) << DescribeShard(s.model);
  LOG_IF(INFO, !opts.quiet) << "config " << cfg.path << ", engine " << s.engine->Describe() << ", device "
                            << s.dev.ToString() << ", memory strategy " << strategy.Name() << ", dtype "
                            << cfg.net.dtype();
  // One line; the table of nodes under --v=1 (or `frugal summary`).
  LOG_IF(INFO, !opts.quiet) << "graph: " << GraphTotals(s.model.eval) << "; "
                            << PlanSummary(s.model.train_plan, s.model.batch);
  VLOG_IF(1, !opts.quiet) << "graph:\n" << GraphSummary(s.model.eval);
  // A run that validates holds the eval arena and batch from the start, so
  // its memory does not grow at the first validation; one without
  // validation data never allocates them.
  std::unique_ptr<Feed> eval_feed;
  if (data.val) {
    const Executor& eval = s.Eval();
    eval_feed = MakeFeed(&s, eval, s.eval_inputs);
  }

  const int iter_size = sc.iter_size();
  int64_t total_updates = sc.epochs() * data.batches / iter_size;
  if (sc.max_iters() > 0) total_updates = std::min(total_updates, sc.max_iters() / iter_size);

  Run r(cfg, opts, &s, dp.get(), data.batches);
  const Resumed at = Start(&r);
  const LrSchedule lr = Schedule(sc, std::max<int64_t>(1, total_updates), at, cfg.path);
  r.lr_schedule_iters = lr.Length();
  LOG_IF(INFO, !opts.quiet) << "optimizer " << s.opt->name() << ", learning rate " << lr.ToString() << ", iter_size "
                            << iter_size
                            << (sc.clip_gradient() > 0 ? Fmt(", gradient norm clipped at ", sc.clip_gradient()) : "");
  Step step(&s, dp.get(), sc);
  Fit fit(&r, Observers(r), &step, lr, {data.train, feed.get()}, {data.val, eval_feed.get()});
  DrainOnUnwind drain(s.engine);
  fit.Epochs(at.data_position);

  s.engine->WaitAll();
  if (dp) LOG_IF(INFO, !opts.quiet) << dp->comm()->Stats();
  fit.End();
  if (!opts.quiet) LogMemory(s);
  if (opts.final_params) {
    for (const auto& [name, w] : OnHost(s.params.Values())) (*opts.final_params)[name].assign(w.f(), w.f() + w.size());
  }
  return fit.accuracy();
}

std::string VariableDifference(const ConfigFile& cfg, const std::string& stored, const std::string& path) {
  std::map<std::string, std::string> trained;
  try {
    trained = ParseConfig(stored, path, {}).values;
  } catch (const Error&) { return ""; }
  std::string here, there, defines;
  int differ = 0;
  for (const auto& [name, value] : trained) {
    auto it = cfg.values.find(name);
    const bool derived = value.find("$(") != std::string::npos;
    if (it == cfg.values.end() || it->second == value || derived || ++differ > 3) continue;
    const char* comma = differ > 1 ? ", " : "";
    here += Fmt(comma, name, "=", it->second);
    there += Fmt(comma, name, "=", value);
    defines += Fmt(differ > 1 ? " " : "", "--define ", name, "=", value);
  }
  if (differ == 0) return "";
  const std::string more = differ > 3 ? Fmt(" (and ", differ - 3, " more)") : "";
  return Fmt("the config gives ", here, more, " but ", path, " was trained with ", there, more, " (", defines,
             ", or leave out --config: the checkpoint holds its config)");
}

MetricSet Test(const ConfigFile& cfg, const std::string& checkpoint) {
  const config::Data& dc = cfg.net.data();
  Session s(cfg, ConfigStrategy(cfg), nullptr, Device{});
  const Executor& eval = s.Eval();
  std::unique_ptr<Feed> feed = MakeFeed(&s, eval, s.eval_inputs);
  CheckpointState c = LoadCheckpoint(checkpoint);
  RestoreNamingTheConfig(cfg, c, checkpoint, [&] {
    RestoreTensors(c.params, s.params.Values(), "parameters", checkpoint);
    RestoreTensors(c.aux, s.aux, "aux state", checkpoint);
  });
  const bool val = dc.has_val();
  std::unique_ptr<DataIter> it =
      LoadSource(cfg, val ? dc.val() : dc.train(), val ? "val" : "train", s.model.shapes(), false);
  LOG(INFO) << "test " << checkpoint << " on data." << (val ? "val" : "train") << ": " << it->Describe();
  return Evaluate(&s, feed.get(), it.get(), cfg.net.solver());
}

ConfigFile CheckpointConfig(const std::string& checkpoint) {
  const CheckpointState c = LoadCheckpoint(checkpoint);
  FRUGAL_REQUIRE(!c.config_text.empty(), checkpoint, ": the checkpoint holds no config; give --config FILE");
  return ParseConfig(c.config_text, checkpoint + " (its config)", {});
}

}  // namespace frugal
