// The chain model of one-level recomputation and its exact dynamic program
// (the budget strategy's planner; build_training_plan.h states the model).
//
// Blocks 0..L-1 are stored (one entry of their menu) or recomputed; a run
// of recomputed blocks i..k between cuts is recomputed from the boundary
// before it, once, while backward goes through it. With K = the bytes kept
// before a block:
//   stored block j, entry e: peak >= K + e.peak; K += e.kept (+ read_j where
//                     boundary_j is cut); cost += e.cost (+ boundary_cost_j
//                     where e recomputes it and it is not cut)
//   recomputed run i..k: peak >= K + sum(read_m + boundary_m) + max(held_m),
//                     cost += sum(inner_i..inner_k) + the boundaries inside
//                     it and after it that are not cut
// A cut boundary is held to the backward pass for what reads it there: its
// gradients (read_j, the part of its bytes they read) and, for all of it, a
// run that starts after it or a stored entry after it that recomputes a
// node reading it (reads_before): K += boundary_j - read_j as that block
// begins. Where neither reads it, it dies in the forward pass.
// A stored entry that keeps its boundary is cut; one that does not may be;
// runs start and end at cuts. A run of one block, cut on both sides
// everywhere, is the sqrt plan's shape. The state records whether the
// boundary before the next block is kept (a run may start only there). The
// peak is at least the final K (everything kept at the end of the forward
// pass). The program runs over (block, K in slots of the memory, Slots):
// best[j][q] = the least cost of blocks 0..j-1 keeping q slots. Block j's
// sizes are rounded up where their fraction of a slot exceeds
// frac(j * golden ratio), down elsewhere: the thresholds spread evenly over
// the blocks, so a plan's rounding errors cancel instead of adding up
// (rounded up, ResNet-1001's 337 blocks took more than 512 slots). The
// program still picks, among a block's entries, those its rounding favours,
// so the error a plan can gain is up to a slot per block: Slots keeps a
// slot small against a block. O(L S E + L log L), S the slots, E the
// entries of a menu: runs are relaxed by target, from a sliding window of
// their starts per slot count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "passes/build_training_plan.h"

namespace frugal {
namespace {
// The memory in slots: kSlotsPerBlock per block, so that the rounding a
// plan can gain (up to a slot per block) is a quarter of a block's share
// of the memory, not all of it (ResNet-1001's 337 blocks in 512 slots:
// plans held 24% more than the memory they were planned in, and their
// entries were chosen by their rounding; in 1,348 slots, 8% more, and
// they recompute 2-11% less at five budgets); at least kMinSlots, the
// resolution of a short chain; within kMostStates states of the program
// (2 (L + 1) (S + 1), about 20 bytes each): at most 1,444 slots, which
// Step's int16_t slot counts hold.
constexpr long kSlotsPerBlock = 4, kMinSlots = 512, kMostStates = 1 << 20;
int Slots(size_t blocks) {
  const long n = static_cast<long>(blocks);
  return static_cast<int>(std::max(kMinSlots, std::min(kSlotsPerBlock * n, kMostStates / (2 * (n + 1)))));
}
}  // namespace

int64_t ChainPeak(const std::vector<ChainBlock>& chain, const ChainPlan& plan) {
  int64_t kept = 0, peak = 0, run = 0, widest = 0;
  for (size_t j = 0; j < chain.size(); ++j) {
    const ChainBlock& b = chain[j];
    const bool recomputed = plan.entry[j] == ChainPlan::kRecompute;
    const bool starts_run = recomputed && (j == 0 || plan.entry[j - 1] != ChainPlan::kRecompute || plan.cut[j - 1]);
    // The part of a kept boundary the backward pass does not read, held for
    // the block after it where that recomputes from it.
    if (j > 0 && plan.cut[j - 1] && (starts_run || (!recomputed && b.stored[plan.entry[j]].reads_before)))
      kept += chain[j - 1].boundary_bytes - chain[j - 1].boundary_read;
    if (recomputed) {
      run += b.read_bytes + b.boundary_bytes;
      widest = std::max(widest, b.held_bytes);
      if (!plan.cut[j] && j + 1 < chain.size() && plan.entry[j + 1] == ChainPlan::kRecompute)
        continue;  // the run goes on
      peak = std::max(peak, kept + run + widest);
      run = widest = 0;
      if (plan.cut[j]) kept += b.boundary_read;
      continue;
    }
    const ChainBlock::Stored& e = b.stored[plan.entry[j]];
    peak = std::max(peak, kept + e.peak);
    kept += e.kept + (plan.cut[j] ? b.boundary_read : 0);
  }
  return std::max(peak, kept);
}

double ChainCost(const std::vector<ChainBlock>& chain, const ChainPlan& plan) {
  double cost = 0;
  for (size_t j = 0; j < chain.size(); ++j) {
    const ChainBlock& b = chain[j];
    cost += plan.entry[j] == ChainPlan::kRecompute ? b.inner_cost : b.stored[plan.entry[j]].cost;
    cost += plan.cut[j] ? 0 : b.boundary_cost;
  }
  return cost;
}

namespace {

// The dynamic program of ChainRecompute over one chain and memory.
// best[At(c, j, q)]: the least cost of blocks 0..j-1 keeping q slots, with
// the boundary before block j kept (c = 1) or recomputed (c = 0); from[]:
// how that state was reached, for the walk back.
class ChainProgram {
 public:
  ChainProgram(const std::vector<ChainBlock>& chain, int64_t memory)
      : chain_(chain),
        n_(chain.size()),
        num_slots_(Slots(n_)),
        slot_(static_cast<double>(memory) / num_slots_),
        width_(num_slots_ + 1),
        best_(2 * (n_ + 1) * width_, kInf),
        from_(best_.size()),
        window_(width_),
        head_(width_, 0) {
    SizeBlocks();
    PrefixSums();
  }

  ChainPlan Solve() {
    best_[At(1, 0, 0)] = 0;  // the data before block 0 is kept
    for (size_t i = 0; i < n_; ++i) {
      EndRuns(i);
      for (int c = 0; c < 2; ++c) {
        Front(c, i);
        Store(c, i);
        if (c == 1) StartRuns(i);
      }
    }
    return WalkBack();
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Sizes {
    int kept, peak;  // a stored entry's, in slots
  };
  // How (c, j, q) was reached: the last step began at block `start` in state (c, q).
  struct Step {
    int32_t start = -1;
    int16_t q = -1;
    uint8_t c = 0;
    int16_t entry = ChainPlan::kRecompute;
  };
  // A state (1, i, q) a run may start from, with best(1, i, q) - I[i] - B[i].
  struct Start {
    int i, q;
    double key;
  };

  size_t At(int c, size_t j, int q) const { return (c * (n_ + 1) + j) * width_ + q; }

  int SlotsOf(int64_t bytes, double threshold) const {
    const double x = static_cast<double>(bytes) / slot_, s = std::floor(x) + (x - std::floor(x) > threshold);
    return s > num_slots_ ? num_slots_ + 1 : static_cast<int>(s);
  }

  // Each entry's sizes in slots, and a cut boundary's: what the backward
  // pass reads, and the rest, held where the next block recomputes from it
  // (unread_[j + 1]).
  void SizeBlocks() {
    stored_.resize(n_);
    read_.resize(n_);
    unread_.assign(n_ + 1, 0);
    for (size_t j = 0; j < n_; ++j) {
      const ChainBlock& b = chain_[j];
      const double threshold = std::fmod(static_cast<double>(j) * 0.6180339887498949, 1.0);
      for (const ChainBlock::Stored& e : b.stored)
        stored_[j].push_back({SlotsOf(e.kept, threshold), SlotsOf(e.peak, threshold)});
      read_[j] = SlotsOf(b.boundary_read, threshold);
      unread_[j + 1] = SlotsOf(b.boundary_bytes - b.boundary_read, threshold);
    }
  }

  // A run of blocks i..j-1 costs (I[j] - I[i]) + (B[j-1] - B[i]) (its
  // inner costs, and the boundaries inside it) and needs RunSlots(i, j):
  // its read and boundary bytes (prefix sums R) and its widest block (a
  // sparse table of range maxima). FLOP costs are whole numbers, so these
  // sums are exact in any order; costs in ms may differ in their last bits
  // from a sum block by block, which only picks among plans of equal cost.
  void PrefixSums() {
    I_.assign(n_ + 1, 0);
    B_.assign(n_ + 1, 0);
    R_.assign(n_ + 1, 0);
    for (size_t j = 0; j < n_; ++j) {
      I_[j + 1] = I_[j] + chain_[j].inner_cost;
      B_[j + 1] = B_[j] + chain_[j].boundary_cost;
      R_[j + 1] = R_[j] + chain_[j].read_bytes + chain_[j].boundary_bytes;
    }
    // widest_[k][i]: the largest held_bytes of blocks i..i+2^k-1
    widest_.assign(1, {});
    for (const ChainBlock& b : chain_) widest_[0].push_back(b.held_bytes);
    for (size_t k = 1; (size_t{1} << k) <= n_; ++k) {
      widest_.emplace_back(n_ - (size_t{1} << k) + 1);
      for (size_t i = 0; i < widest_[k].size(); ++i)
        widest_[k][i] = std::max(widest_[k - 1][i], widest_[k - 1][i + (size_t{1} << (k - 1))]);
    }
  }

  int RunSlots(size_t i, size_t j) const {
    const int k = 63 - __builtin_clzll(j - i);
    const int64_t wide = std::max(widest_[k][i], widest_[k][j - (size_t{1} << k)]);
    return SlotsOf(R_[j] - R_[i] + wide, 0.5);
  }

  void Relax(int c, size_t j, int q, double cost, Step step) {
    if (q > num_slots_) return;
    const size_t at = At(c, j, q);
    if (cost < best_[at]) {
      best_[at] = cost;
      from_[at] = step;
    }
  }

  // Runs of blocks i'..i from the states before i (i' < i), the cheapest
  // (the earliest of equals) for each q. Runs are relaxed by target: for
  // each slot count q, the states a run may start from wait in a window (a
  // deque of increasing key, by i); a state leaves it when the run from it
  // to the target no longer fits in the slots left (no longer run does).
  void EndRuns(size_t i) {
    const double to_end = I_[i + 1] + B_[i];
    for (int q = 0; q + read_[i] <= num_slots_; ++q) {
      std::vector<Start>& w = window_[q];
      size_t& h = head_[q];
      while (h < w.size() && q + RunSlots(w[h].i, i + 1) > num_slots_) ++h;
      if (h < w.size())
        Relax(1, i + 1, q + read_[i], w[h].key + to_end,
              {w[h].i, static_cast<int16_t>(w[h].q), 1, static_cast<int16_t>(ChainPlan::kRecompute)});
    }
  }

  // The states (c, i, q) to expand: a state that keeps more slots than one
  // that costs no more is not, since whatever follows it follows the cheaper
  // one too, in fewer slots, so no plan the program returns passes through it.
  void Front(int c, size_t i) {
    front_.clear();
    double cheapest = kInf;  // of the states (c, i, fewer slots)
    for (int q = 0; q <= num_slots_; ++q) {
      const double f = best_[At(c, i, q)];
      if (f < cheapest) cheapest = f, front_.push_back(q);
    }
  }

  // Block i stored, each entry of its menu: its boundary kept (a cut), or
  // recomputed where the entry does not keep it.
  void Store(int c, size_t i) {
    const ChainBlock& b = chain_[i];
    for (int q : front_) {
      const double f = best_[At(c, i, q)];
      bool fits = false;
      for (size_t e = 0; e < stored_[i].size(); ++e) {
        const Sizes& z = stored_[i][e];
        const ChainBlock::Stored& entry = b.stored[e];
        const int held = q + (c == 1 && entry.reads_before ? unread_[i] : 0);
        if (held + z.peak > num_slots_) continue;
        fits = true;
        const Step step{static_cast<int32_t>(i), static_cast<int16_t>(q), static_cast<uint8_t>(c),
                        static_cast<int16_t>(e)};
        Relax(1, i + 1, held + z.kept + read_[i], f + entry.cost, step);
        if (!entry.keeps_boundary) Relax(0, i + 1, held + z.kept, f + entry.cost + b.boundary_cost, step);
      }
      if (!fits) break;  // nor with more slots kept before it
    }
  }

  // Block i dropped alone, then block i a run's first for later targets
  // (from the states with the boundary before it kept). A run from block i
  // holds the unread part of the boundary before it.
  void StartRuns(size_t i) {
    const int alone = RunSlots(i, i + 1);
    for (int q : front_) {
      const double f = best_[At(1, i, q)];
      const int held = q + unread_[i];
      if (held + alone <= num_slots_)
        Relax(1, i + 1, held + read_[i], f + chain_[i].inner_cost,
              {static_cast<int32_t>(i), static_cast<int16_t>(q), 1, static_cast<int16_t>(ChainPlan::kRecompute)});
      if (held > num_slots_) continue;
      std::vector<Start>& w = window_[held];
      const double key = f - I_[i] - B_[i];
      while (w.size() > head_[held] && w.back().key > key) w.pop_back();
      w.push_back({static_cast<int>(i), q, key});
    }
  }

  // The cheapest end state, and the steps back from it.
  ChainPlan WalkBack() const {
    int c = -1, q = -1;
    for (int cc = 0; cc < 2; ++cc)
      for (int s = 0; s <= num_slots_; ++s)
        if (best_[At(cc, n_, s)] < kInf && (q < 0 || best_[At(cc, n_, s)] < best_[At(c, n_, q)])) c = cc, q = s;
    if (q < 0) return {};
    ChainPlan plan{std::vector<int>(n_, ChainPlan::kRecompute), std::vector<bool>(n_, false)};
    for (size_t j = n_; j > 0;) {
      const Step st = from_[At(c, j, q)];
      for (size_t k = st.start; k < j; ++k) plan.entry[k] = st.entry;
      plan.cut[j - 1] = c == 1;
      j = st.start;
      c = st.c;
      q = st.q;
    }
    return plan;
  }

  const std::vector<ChainBlock>& chain_;
  const size_t n_;
  const int num_slots_;
  const double slot_;
  const size_t width_;
  std::vector<std::vector<Sizes>> stored_;
  std::vector<int> read_, unread_;
  std::vector<double> I_, B_;
  std::vector<int64_t> R_;
  std::vector<std::vector<int64_t>> widest_;
  std::vector<double> best_;
  std::vector<Step> from_;
  std::vector<std::vector<Start>> window_;
  std::vector<size_t> head_;
  std::vector<int> front_;
};

}  // namespace

ChainPlan ChainRecompute(const std::vector<ChainBlock>& chain, int64_t memory) {
  if (memory <= 0 || chain.empty()) return {};
  return ChainProgram(chain, memory).Solve();
}

}  // namespace frugal
