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

ChainPlan ChainRecompute(const std::vector<ChainBlock>& chain, int64_t memory) {
  const size_t n = chain.size();
  if (memory <= 0 || n == 0) return {};
  const int num_slots = Slots(n);
  const double slot = static_cast<double>(memory) / num_slots;
  auto slots = [&](int64_t bytes, double threshold) {
    const double x = static_cast<double>(bytes) / slot, s = std::floor(x) + (x - std::floor(x) > threshold);
    return s > num_slots ? num_slots + 1 : static_cast<int>(s);
  };
  struct Sizes {
    int kept, peak;  // a stored entry's, in slots
  };
  std::vector<std::vector<Sizes>> stored(n);
  // A cut boundary's slots: what the backward pass reads, and the rest,
  // held where the next block recomputes from it (unread[j + 1]).
  std::vector<int> read(n), unread(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    const ChainBlock& b = chain[j];
    const double threshold = std::fmod(static_cast<double>(j) * 0.6180339887498949, 1.0);
    for (const ChainBlock::Stored& e : b.stored)
      stored[j].push_back({slots(e.kept, threshold), slots(e.peak, threshold)});
    read[j] = slots(b.boundary_read, threshold);
    unread[j + 1] = slots(b.boundary_bytes - b.boundary_read, threshold);
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t width = num_slots + 1;
  // best[At(c, j, q)]: the least cost of blocks 0..j-1 keeping q slots, with
  // the boundary before block j kept (c = 1) or recomputed (c = 0).
  auto At = [&](int c, size_t j, int q) { return (c * (n + 1) + j) * width + q; };
  std::vector<double> best(2 * (n + 1) * width, kInf);
  // How (c, j, q) was reached: the last step began at block `start` in state (c, q).
  struct Step {
    int32_t start = -1;
    int16_t q = -1;
    uint8_t c = 0;
    int16_t entry = ChainPlan::kRecompute;
  };
  std::vector<Step> from(best.size());
  auto relax = [&](int c, size_t j, int q, double cost, Step step) {
    if (q > num_slots) return;
    const size_t at = At(c, j, q);
    if (cost < best[at]) {
      best[at] = cost;
      from[at] = step;
    }
  };
  // A run of blocks i..j-1 costs (I[j] - I[i]) + (B[j-1] - B[i]) (its
  // inner costs, and the boundaries inside it) and needs run_slots(i, j):
  // its read and boundary bytes (prefix sums R) and its widest block (a
  // sparse table of range maxima). FLOP costs are whole numbers, so these
  // sums are exact in any order; costs in ms may differ in their last bits
  // from a sum block by block, which only picks among plans of equal cost.
  std::vector<double> I(n + 1, 0), B(n + 1, 0);
  std::vector<int64_t> R(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    I[j + 1] = I[j] + chain[j].inner_cost;
    B[j + 1] = B[j] + chain[j].boundary_cost;
    R[j + 1] = R[j] + chain[j].read_bytes + chain[j].boundary_bytes;
  }
  // widest[k][i]: the largest held_bytes of blocks i..i+2^k-1
  std::vector<std::vector<int64_t>> widest(1);
  for (const ChainBlock& b : chain) widest[0].push_back(b.held_bytes);
  for (size_t k = 1; (size_t{1} << k) <= n; ++k) {
    widest.emplace_back(n - (size_t{1} << k) + 1);
    for (size_t i = 0; i < widest[k].size(); ++i)
      widest[k][i] = std::max(widest[k - 1][i], widest[k - 1][i + (size_t{1} << (k - 1))]);
  }
  auto run_slots = [&](size_t i, size_t j) {
    const int k = 63 - __builtin_clzll(j - i);
    const int64_t wide = std::max(widest[k][i], widest[k][j - (size_t{1} << k)]);
    return slots(R[j] - R[i] + wide, 0.5);
  };
  // Runs are relaxed by target: for each slot count q, the states (1, i, q)
  // a run may start from, in a window (a deque of increasing cost less the
  // prefix sums, by i): a state leaves it when the run from it to the target
  // no longer fits in the slots left (it fits no longer run either).
  struct Start {
    int i, q;    // the state (1, i, q) the run starts from
    double key;  // best(1, i, q) - I[i] - B[i]
  };
  std::vector<std::vector<Start>> window(width);
  std::vector<size_t> head(width, 0);
  std::vector<int> front;  // the states (c, i, q) expanded: no state of fewer slots costs as little
  best[At(1, 0, 0)] = 0;   // the data before block 0 is kept
  for (size_t i = 0; i < n; ++i) {
    const ChainBlock& b = chain[i];
    // Runs of blocks i'..i from the states before i (i' < i), the cheapest
    // (the earliest of equals) for each q.
    const double to_end = I[i + 1] + B[i];
    for (int q = 0; q + read[i] <= num_slots; ++q) {
      std::vector<Start>& w = window[q];
      size_t& h = head[q];
      while (h < w.size() && q + run_slots(w[h].i, i + 1) > num_slots) ++h;
      if (h < w.size())
        relax(1, i + 1, q + read[i], w[h].key + to_end,
              {w[h].i, static_cast<int16_t>(w[h].q), 1, static_cast<int16_t>(ChainPlan::kRecompute)});
    }
    for (int c = 0; c < 2; ++c) {
      // A state that keeps more slots than one that costs no more is not
      // expanded: whatever follows it follows the cheaper one too, in fewer
      // slots, so no plan the program returns passes through it.
      front.clear();
      double cheapest = kInf;  // of the states (c, i, fewer slots)
      for (int q = 0; q <= num_slots; ++q) {
        const double f = best[At(c, i, q)];
        if (f < cheapest) cheapest = f, front.push_back(q);
      }
      // Block i stored, each entry of its menu: its boundary kept (a cut),
      // or recomputed where the entry does not keep it.
      for (int q : front) {
        const double f = best[At(c, i, q)];
        bool fits = false;
        for (size_t e = 0; e < stored[i].size(); ++e) {
          const Sizes& z = stored[i][e];
          const ChainBlock::Stored& entry = b.stored[e];
          const int held = q + (c == 1 && entry.reads_before ? unread[i] : 0);
          if (held + z.peak > num_slots) continue;
          fits = true;
          const Step step{static_cast<int32_t>(i), static_cast<int16_t>(q), static_cast<uint8_t>(c),
                          static_cast<int16_t>(e)};
          relax(1, i + 1, held + z.kept + read[i], f + entry.cost, step);
          if (!entry.keeps_boundary) relax(0, i + 1, held + z.kept, f + entry.cost + b.boundary_cost, step);
        }
        if (!fits) break;  // nor with more slots kept before it
      }
      if (c == 0) continue;
      // Block i dropped alone, then block i a run's first for later targets.
      // A run from block i holds the unread part of the boundary before it.
      const int alone = run_slots(i, i + 1);
      for (int q : front) {
        const double f = best[At(1, i, q)];
        const int held = q + unread[i];
        if (held + alone <= num_slots)
          relax(1, i + 1, held + read[i], f + b.inner_cost,
                {static_cast<int32_t>(i), static_cast<int16_t>(q), 1, static_cast<int16_t>(ChainPlan::kRecompute)});
        if (held > num_slots) continue;
        std::vector<Start>& w = window[held];
        const double key = f - I[i] - B[i];
        while (w.size() > head[held] && w.back().key > key) w.pop_back();
        w.push_back({static_cast<int>(i), q, key});
      }
    }
  }
  int c = -1, q = -1;
  for (int cc = 0; cc < 2; ++cc)
    for (int s = 0; s <= num_slots; ++s)
      if (best[At(cc, n, s)] < kInf && (q < 0 || best[At(cc, n, s)] < best[At(c, n, q)])) c = cc, q = s;
  if (q < 0) return {};
  ChainPlan plan{std::vector<int>(n, ChainPlan::kRecompute), std::vector<bool>(n, false)};
  for (size_t j = n; j > 0;) {
    const Step st = from[At(c, j, q)];
    for (size_t k = st.start; k < j; ++k) plan.entry[k] = st.entry;
    plan.cut[j - 1] = c == 1;
    j = st.start;
    c = st.c;
    q = st.q;
  }
  return plan;
}

}  // namespace frugal
