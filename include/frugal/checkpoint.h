// Checkpoints: everything needed to resume a run (config text, parameters,
// auxiliary state, optimizer state, RNG state, epoch, iteration, data
// position, the length of its learning-rate schedule, and inside an
// iter_size accumulation its gradient sums) in one file, written atomically
// and checked on load.
//
// File format (little-endian):
//   header   8 bytes magic "FRUGALCK", uint32 format version (3),
//            uint32 CRC-32 (zlib) of the payload, uint64 payload bytes
//   payload  string config_text; int64 epoch, iteration, data_position;
//            int64 lr_schedule_iters (from version 2 on; version 1 files
//            read as 0); string rng_state; string optimizer; uint32 tensor count; per
//            tensor: uint8 section (1 param, 2 aux, 3 optimizer state,
//            4 gradient sum),
//            string name, uint8 dtype, uint32 ndim, int64 dims[ndim], then
//            the raw elements
//   string = uint64 length + bytes
//
// Writing goes to a temporary file in the same directory, which is synced
// and then renamed over the target, and the directory is synced: a crash at
// any point leaves either the old file or the new one, never a mixture.
// Loading refuses (Error naming the file and the problem) a file that is
// shorter or longer than its header says, has a bad magic, an unknown
// version, or a payload whose checksum does not match.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frugal/tensor.h"

namespace frugal {

// 1: without lr_schedule_iters; 2: config_text printed with its variables at
// their declared values (both still read); 3: config_text is ConfigAsRun.
constexpr uint32_t kCheckpointVersion = 3;

struct CheckpointState {
  // The config as run: ConfigAsRun (frugal/config.h), every variable at its
  // final value and relative paths made absolute, so CheckpointConfig
  // rebuilds the model from any folder. Files before version 3 hold it
  // printed with its variables at their declared values (the nodes
  // substituted with the --defines all the same).
  std::string config_text;
  uint32_t version = kCheckpointVersion;  // the format the file was written in (LoadCheckpoint)
  int64_t epoch = 0;                      // the epoch in progress
  int64_t iteration = 0;                  // updates done
  int64_t data_position = 0;              // batches of `epoch` already consumed (BatchIter::position())
  // The updates the run's POLY or COSINE schedule runs over (LrSchedule::
  // Length), which a resumed run continues when the config does not set
  // solver.lr_schedule_iters; 0: another policy, or a version-1 file.
  int64_t lr_schedule_iters = 0;
  std::string rng_state;  // Rng::Save()
  std::string optimizer;  // Optimizer::name(); resuming checks it
  // By name; saving reads the tensors in place (views, no copies); loading
  // allocates fresh float32 tensors.
  std::map<std::string, Tensor> params, aux;
  std::map<std::string, Tensor> opt_state;  // "<param>/<state>", see NamedStates()
  // "<param>": with iter_size > 1, the sums of the micro-batches of the
  // update in progress; present only in a checkpoint written inside one
  // (at an epoch's end, --max-iters, a signal). That update's micro-batches
  // done are then epoch * batches per epoch + data_position - iteration *
  // iter_size.
  std::map<std::string, Tensor> grad_sums;
};

// For tests only: makes the writer stop after this many bytes of the
// temporary file as a crash would (no rename, temporary left behind), and
// throw Error.
struct CheckpointFault {
  int64_t crash_after_bytes = -1;  // < 0: no fault
};

// Writes s to path atomically. Throws Error naming path on any I/O failure
// (the temporary file is removed then; the previous file at path is intact).
void SaveCheckpoint(const std::string& path, const CheckpointState& s, const CheckpointFault& fault = {});

// Reads and verifies a checkpoint. Throws Error "checkpoint FILE: ..." for a
// missing, truncated, corrupted or foreign file.
CheckpointState LoadCheckpoint(const std::string& path);

// The checkpoint that --resume, --weights and --checkpoint name: a file as
// it is, or a directory's latest ckpt-<iteration>.frugal. Throws Error "DIR:
// no checkpoint in this directory ..." for a directory without one.
std::string ResolveCheckpoint(const std::string& file_or_dir);

// Resuming: copies every tensor of src into the tensor of the same name in
// dst (views of the bound tensors). Names and shapes must match exactly;
// otherwise throws Error naming the file, `what` ("parameters", "optimizer
// state") and the missing, unexpected and wrong-shaped names.
void RestoreTensors(const std::map<std::string, Tensor>& src, const std::map<std::string, Tensor>& dst,
                    const std::string& what, const std::string& path);

// `--weights FILE`: what a partial load by name did.
struct WeightsReport {
  std::vector<std::string> matched;      // copied
  std::vector<std::string> missing;      // in the model, not in the file (left as initialized)
  std::vector<std::string> wrong_shape;  // "name: file (a,b), model (c,d)" (left as initialized)
  std::vector<std::string> unused;       // in the file, not in the model
  // "weights FILE: 4 matched, 2 missing (fc3_weight, fc3_bias), ..."
  std::string ToString(const std::string& path) const;
};

// Copies the parameters and aux state saved in the checkpoint at path into
// the tensors of `model` (views, by name) where name and shape match.
// Throws only for an unreadable file.
WeightsReport LoadWeights(const std::string& path, const std::map<std::string, Tensor>& model);

// Periodic checkpoints in a directory: files "ckpt-<iteration, 10
// digits>.frugal", the last `keep` kept (0: all).
class CheckpointManager {
 public:
  // interval: iterations between checkpoints; 0: one at the end of each
  // epoch. Creates dir if missing (Error if it cannot). A folder holds one
  // run: the manager locks it (flock on dir/.lock, holding its pid) for its
  // lifetime, and a second one, in this process or another, is an Error
  // naming the holder's pid.
  CheckpointManager(const std::string& dir, int64_t interval, int keep);
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Whether a checkpoint is due after `iteration` updates; epoch_end says
  // the epoch just finished.
  bool Due(int64_t iteration, bool epoch_end) const;
  // Saves s as dir/ckpt-<s.iteration>.frugal, then removes the oldest
  // beyond `keep`. Returns the path written.
  std::string Save(const CheckpointState& s, const CheckpointFault& fault = {});
  // Complete checkpoints in dir, oldest first (temporary files of
  // interrupted writes are not listed).
  std::vector<std::string> List() const;
  std::string Latest() const;  // "" if none
  std::string PathFor(int64_t iteration) const;

 private:
  std::string dir_;
  int64_t interval_;
  int keep_;
  int lock_ = -1;  // the open dir/.lock, flocked
};

}  // namespace frugal
