// Checkpoints through CheckpointManager: every checkpoint_interval updates
// or epoch (interval 0), and when a signal stops the run. A checkpoint
// records where the data continues: the next batch of the epoch, or the
// next epoch's start; inside an iter_size accumulation also its gradient
// sums.
#include <glog/logging.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>

#include "train/observer.h"

namespace fs = std::filesystem;

namespace frugal {
namespace {

class Checkpoints : public Observer {
 public:
  Checkpoints(const config::Solver& sc, const std::string& resume) {
    if (sc.checkpoint_dir().empty()) return;
    ckpt_ = std::make_unique<CheckpointManager>(sc.checkpoint_dir(), sc.checkpoint_interval(), sc.keep_checkpoints());
    // Rotation removes the folder's oldest checkpoints, and --resume DIR
    // takes its latest: a folder holds one run. A run continues the one
    // there (resuming from it) or starts in a folder without checkpoints.
    const std::string latest = ckpt_->Latest();
    if (latest.empty()) return;
    std::error_code ec;
    fs::path from = fs::is_directory(resume, ec) ? fs::path(resume) : fs::path(resume).parent_path();
    if (from.empty()) from = ".";  // a file in the working directory
    const bool continues = !resume.empty() && fs::equivalent(from, sc.checkpoint_dir(), ec);
    FRUGAL_REQUIRE(continues, sc.checkpoint_dir(), " holds the checkpoints of another run (the latest ", latest, ")",
                   resume.empty() ? "" : Fmt(", not the run resumed from ", resume),
                   ": a run there would rotate them away and mix with them. Continue it with --resume ",
                   sc.checkpoint_dir(), ", or give another --checkpoint-dir (or remove them)");
  }

  void OnUpdate(Run& r, float lr) override {
    const int64_t interval = r.sc.checkpoint_interval();
    if (interval <= 0 || r.updates() % interval != 0) return;
    if (r.batch == r.batches) return;  // the epoch's last batch: OnEpochEnd saves it, as the next epoch's start
    Checkpoint(r, true, lr);
  }

  void OnStop(Run& r, float lr) override { Checkpoint(r, true, lr); }  // every rank stops at the same update

  // A run without a checkpoint directory says so at its end (whether it
  // finished or a signal stopped it): the trained model is gone with the
  // process. No default folder is written: a second run of the same command
  // into it would be refused (a folder holds one run).
  void OnEnd(Run& r) override {
    LOG_IF(WARNING, !ckpt_ && !r.opts.quiet)
        << "nothing was saved: no checkpoint directory (give --checkpoint-dir DIR or solver.checkpoint_dir to keep "
           "the trained model)";
  }

  void OnEpochEnd(Run& r, const EpochEnd& e) override {
    // Due every epoch, or at the multiples of checkpoint_interval; and the
    // run's end always (its last epoch, or max_iters: a run stopped inside
    // the epoch resumes at its next batch), so the trained model is never
    // lost between two multiples of the interval.
    const bool run_ends = r.done || r.stop || r.epoch + 1 >= r.sc.epochs();
    Checkpoint(r, ckpt_ && (ckpt_->Due(r.updates(), true) || run_ends), e.lr);
  }

 private:
  // Where a checkpoint may be written, reached by every rank; whether one
  // is (`due` and a folder) only rank 0 knows, the others having no folder.
  // Every rank averages what the ranks hold apart (Run::AverageAcrossRanks)
  // and, with --shard optimizer, when rank 0 saves, sends it its slices of
  // the optimizer state (Session::OptState). lr: the rate of the last
  // update, for the advice on a state that is not a number.
  void Checkpoint(Run& r, bool due, float lr) {
    r.AverageAcrossRanks();
    due = due && ckpt_;
    if (r.s.model.shard.ranks > 1 ? r.dp->Sum(due) == 0 : !due) return;
    r.s.engine->WaitAll();
    std::map<std::string, Tensor> opt_state = r.s.OptState(r.dp);
    if (due) Save(r, std::move(opt_state), lr);
  }

  void Save(Run& r, std::map<std::string, Tensor> opt_state, float lr) {
    const bool in_epoch = r.batch < r.batches;
    r.progress.Clear();
    r.CheckFinite(r.iter - 1, lr);
    CheckpointState state = r.s.State(r.cfg, in_epoch ? r.epoch : r.epoch + 1, r.updates(), in_epoch ? r.batch : 0);
    state.opt_state = std::move(opt_state);
    state.lr_schedule_iters = r.lr_schedule_iters;
    // Inside an accumulation (an epoch's end, max_iters, a signal): its
    // micro-batches so far (data-parallel: averaged over the ranks by
    // AverageAcrossRanks, which every rank ran before this).
    if (!r.updated()) state.grad_sums = OnHost(r.s.params.Sums());
    // A checkpoint is something to resume from: never one of a broken loss
    // or state.
    for (const auto* part : {&state.params, &state.aux, &state.opt_state, &state.grad_sums}) {
      const std::string bad = FirstNonFinite(*part);
      FRUGAL_REQUIRE(bad.empty(), "update ", r.updates(), ": the state is not a number (", bad,
                     ") and is not checkpointed (what ", r.sc.checkpoint_dir(), " holds is from before it). ",
                     NonFiniteAdvice(lr));
    }
    const std::string path = ckpt_->Save(state);
    LOG_IF(INFO, !r.opts.quiet) << "checkpoint " << path;
  }

  std::unique_ptr<CheckpointManager> ckpt_;
};

}  // namespace

std::unique_ptr<Observer> MakeCheckpoints(const config::Solver& sc, const std::string& resume) {
  return std::make_unique<Checkpoints>(sc, resume);
}

}  // namespace frugal
