// PlanTraining: choose what to recompute, then build and plan the training
// graph. sqrt searches the segment budget of the paper's greedy split for
// the smallest arena; budget=SIZE looks for the least recomputation (in
// FLOPs, or in predicted time with the strategy's cost table) whose placed
// arena fits:
//   1. no recomputation (share), where it fits;
//   2. the least recomputation among the fitting plans of drop_cheap and
//      of two searches:
//      (a) drop_cheap with some sqrt segments recomputed whole, ranked by
//      bytes freed per cost, the count found by binary search (where
//      drop_cheap does not fit);
//      (b) the block program: the graph's chain of blocks (cut at the
//      split candidates), each with a menu of entries priced by the
//      BackwardReads bound (kept whole, some or all of its cheap ops
//      recomputed, recomputed whole in a run), one entry per block chosen
//      by the chain program (chain.cc) under a model memory that a
//      correction loop moves by what the built plans hold;
//   3. the sqrt plan, then logn.
// The first step with a plan that fits wins, improved: nodes it recomputes
// kept again where it still fits and, on small graphs, swapped for cheaper
// ones, then kept with what the bound then needs dropped instead, and kept
// nodes dropped with what the bound then needs no more kept again
// (KeepWhatFits). On graphs of at most 64 drop candidates the exact
// search of drop sets cheaper than the plan of steps 1-2 (drop_sets.cc;
// before step 3 where they found none) follows, for a bounded number of
// builds: it finds the optimum, or proves that plan optimal, when the
// optimum is few sets away.
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "frugal/passes/costs.h"
#include "frugal/passes/gradient.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/shapes.h"
#include "frugal/passes/training_plan.h"
#include "passes/build_training_plan.h"

namespace frugal {
namespace {

using Inputs = std::vector<std::pair<std::string, Shape>>;

// One planning run: the forward graph, its input shapes, the strategy, the
// device (layouts are chosen on the CPU), and how many training graphs it
// has built (a search builds several; the count is MemoryPlan::num_builds).
struct Search {
  const Graph& fwd;
  const Inputs& inputs;
  const MemoryStrategy& s;
  Device dev;
  int builds = 0;

  // The training graph for keep levels, its arena estimated as its lower
  // bound (searches compare candidates so; Finish places the winner).
  TrainingPlan Build(KeepLevels keep) {
    ++builds;
    return BuildTrainingPlan(fwd, inputs, s, std::move(keep), dev, /*estimate=*/true);
  }
};

// Places a plan found by a search.
TrainingPlan Finish(TrainingPlan t, const MemoryStrategy& s) {
  t.plan = PlanMemory(t.graph, s);
  return t;
}

// Smaller arena first; on a tie, less recomputation.
bool Better(const TrainingPlan& a, const TrainingPlan& b) {
  if (a.plan.arena_bytes != b.plan.arena_bytes) return a.plan.arena_bytes < b.plan.arena_bytes;
  return a.plan.recompute_cost() < b.plan.recompute_cost();
}

int64_t ForwardBytes(const Graph& g) {
  int64_t total = 0;
  for (int i = 0; i < g.num_nodes(); ++i)
    if (!g.node(i).is_variable())
      for (int k = 0; k < g.NumOutputs(i); ++k) total += g.EntryBytes({i, k});
  return total;
}

// The sqrt plan with the smallest arena over segment budgets
// base * 2^(j/2), j in [-6, 6], around the paper's sqrt(x*y) estimate base;
// *best_b gets the winning segment budget. Each budget is priced first by
// its BackwardReads bound (reads: of share's plan), a lower bound of its
// arena made without a build, and built in increasing order of it until
// the next bound exceeds the smallest arena built: the smallest of the 13
// arenas (on a tie, the least recomputation), with as few builds as the
// bound allows (it is within 0.3-1.5% of the sqrt plans' arenas: the
// 4x1024 LSTM at T=256-2048 and ResNet-101-1001 on ImageNet shapes build
// one).
TrainingPlan BestSqrt(Search& q, const BackwardReads& reads, int64_t* best_b = nullptr) {
  const double n = std::max<size_t>(1, SplitCandidates(q.fwd).size());
  const double base = ForwardBytes(q.fwd) / std::sqrt(n);
  std::vector<int64_t> budgets;
  for (int j = -6; j <= 6; ++j) budgets.push_back(static_cast<int64_t>(base * std::pow(2.0, j / 2.0)));
  std::vector<KeepLevels> levels = SqrtLevels(q.fwd, budgets);
  std::vector<std::pair<int64_t, size_t>> by_bound;  // bound, budget
  for (size_t k = 0; k < budgets.size(); ++k)        // budgets that give the same levels (small graphs) are priced once
    if (std::find(levels.begin(), levels.begin() + k, levels[k]) == levels.begin() + k)
      by_bound.emplace_back(reads.Bound(q.fwd, levels[k]), k);
  std::stable_sort(by_bound.begin(), by_bound.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::optional<TrainingPlan> best;
  for (const auto& [bound, k] : by_bound) {
    if (best && bound > best->plan.arena_bytes) break;
    TrainingPlan t = q.Build(std::move(levels[k]));
    if (best && !Better(t, *best)) continue;
    best = std::move(t);
    if (best_b) *best_b = budgets[k];
  }
  return std::move(*best);
}

// A run of nodes between two checkpoints of a sqrt plan, with what it costs
// to recompute it whole instead of keeping what drop_cheap keeps there.
struct Segment {
  std::vector<int> nodes;
  double bytes_per_cost;  // kept bytes freed per unit of recomputation (RecomputeCost)
};

// The segments of SqrtLevels(fwd, b), most bytes per cost first.
std::vector<Segment> Segments(const Graph& fwd, const KeepLevels& cheap, int64_t b, const CostTable* costs) {
  KeepLevels sqrt = SqrtLevels(fwd, b);
  std::vector<Segment> segs(1);
  std::vector<double> bytes(1, 0), cost(1, 0);
  for (int i = 0; i < fwd.num_nodes(); ++i) {
    const Node& n = fwd.node(i);
    if (n.is_variable()) continue;
    if (sqrt[i] == 0) {  // a checkpoint closes the segment
      segs.emplace_back();
      bytes.push_back(0);
      cost.push_back(0);
      continue;
    }
    segs.back().nodes.push_back(i);
    if (cheap[i] != 0) continue;  // dropped anyway: no bytes freed, no cost added
    for (int k = 0; k < fwd.NumOutputs(i); ++k) bytes.back() += static_cast<double>(fwd.EntryBytes({i, k}));
    cost.back() += RecomputeCost(fwd, i, costs);
  }
  std::vector<Segment> kept;
  for (size_t k = 0; k < segs.size(); ++k) {
    if (bytes[k] == 0) continue;
    segs[k].bytes_per_cost = bytes[k] / std::max(cost[k], 1e-30);
    kept.push_back(std::move(segs[k]));
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const Segment& a, const Segment& b) { return a.bytes_per_cost > b.bytes_per_cost; });
  return kept;
}

KeepLevels DropSegments(const KeepLevels& base, const std::vector<Segment>& segs, size_t count) {
  KeepLevels keep = base;
  for (size_t s = 0; s < count; ++s)
    for (int i : segs[s].nodes) keep[i] = kDropped;
  return keep;
}

// What BudgetSearch::KeepWhatFits tries, and on which graphs.
constexpr size_t kKeepTries = 16;
constexpr int kSwapBuilds = 200;
constexpr int kSwapMisfits = 64;
constexpr int kKeepNodes = 1000;
// What BudgetSearch::RepairedMoves tries: repairs of a move that misses
// the budget, builds and misfits in all.
constexpr int kRepairs = 2;
constexpr int kRepairBuilds = 200;
constexpr int kRepairMisfits = 16;
// The correction loop's rounds at most (BudgetSearch::BlockProgram). Each
// round brackets the model memory tighter; the cap bounds the planning
// time of a graph whose model memory needs many rounds to close.
constexpr int kCorrections = 16;

// One budget search: the candidates' fits, the best that fits and the
// smallest seen (for the error when none fits).
class BudgetSearch {
 public:
  explicit BudgetSearch(Search& q) : q_(q), fwd_(q.fwd), s_(q.s), budget_(q.s.budget_bytes) {
    CHECK(budget_ > 0) << s_.Name() << " reaches the planner unresolved (ResolveAutoBudget, ResolveLimit: train.h)";
  }

  TrainingPlan Run() {
    const KeepLevels base = ApplyAnnotations(fwd_, {});
    smallest_ = q_.Build(base);
    reads_ = GradientReads(fwd_, smallest_);
    backward_reads_ = BackwardReadsOf(fwd_, smallest_);
    base_cost_ = smallest_.plan.recompute_cost();  // of the config's mirror marks
    if (Fits(&smallest_)) {
      Found("share");
      return std::move(smallest_);
    }
    const KeepLevels cheap = DropCheapLevels(fwd_);
    const std::vector<ChainBlock> chain = Chain(fwd_, cheap, s_.costs.get(), smallest_, backward_reads_);
    TrainingPlan t = q_.Build(cheap);
    if (Fits(&t)) {
      best_fit_ = std::move(t);
      Found("drop_cheap");
    } else {
      KeepSmallest(&t, "drop_cheap");
      SqrtSegments(cheap);
    }
    BlockProgram(chain);
    if (best_fit_) best_fit_ = KeepWhatFits(std::move(*best_fit_));
    if (ExactDropSets()) return std::move(*best_fit_);
    if (best_fit_) return std::move(*best_fit_);
    // The fixed plans.
    if (sqrt_.keep.empty()) sqrt_ = BestSqrt(q_, backward_reads_);
    if (Fits(&sqrt_)) {
      Found("sqrt");
      return KeepWhatFits(std::move(sqrt_));
    }
    KeepSmallest(&sqrt_, "sqrt");
    TrainingPlan logn = q_.Build(LognLevels(fwd_));
    if (Fits(&logn)) {
      Found("logn");
      return KeepWhatFits(std::move(logn));
    }
    KeepSmallest(&logn, "logn");
    smallest_ = Finish(std::move(smallest_), s_);
    const int64_t need = smallest_.plan.arena_bytes;
    throw BudgetError(Fmt("memory budget ", HumanBytes(budget_), " (", budget_,
                          " bytes) cannot be met: the smallest plan found (", smallest_by_, ") needs an arena of ",
                          HumanBytes(need), " (", need, " bytes); use budget=", need, " or more, or a smaller batch"),
                      need);
  }

  // Which step chose the plan Run returns, and which improved it.
  const std::string& found_by() const { return found_by_; }

 private:
  void Found(const std::string& by) { found_by_ = by; }
  void Improved(const std::string& by) {
    if (found_by_.size() < by.size() || found_by_.compare(found_by_.size() - by.size(), by.size(), by) != 0)
      found_by_ += ", improved by " + by;
  }

  // The counts of builds and misfits where a search stops.
  struct Allowance {
    int builds, misfits;
  };
  bool Spent(const Allowance& a) const { return q_.builds >= a.builds || misfits_ >= a.misfits; }

  // A candidate fits when its lower bound does and then its arena, placed
  // until it fits, does (PlanTraining places the winner fully). A misfit
  // (the bound fits, the arena does not) is the expensive case: the
  // placement's whole local search runs.
  bool Fits(TrainingPlan* t) {
    if (t->plan.arena_bytes > budget_) return false;
    t->plan = PlanMemory(t->graph, s_, /*estimate=*/false, /*fit_bytes=*/budget_);
    misfits_ += t->plan.arena_bytes > budget_;
    return t->plan.arena_bytes <= budget_;
  }

  void KeepSmallest(TrainingPlan* c, const char* by) {
    if (Better(*c, smallest_)) smallest_ = std::move(*c), smallest_by_ = by;
  }

  // Whether a candidate of a search fits (-1: too big; 0: there was none;
  // 1: fits); the fitting one with the least recomputation is kept. A
  // candidate whose lower bound fits but that recomputes no less than the
  // best so far counts as fitting without being placed (placing is the
  // expensive part of a search step).
  int Consider(std::optional<TrainingPlan> c, const char* by) {
    if (!c) return 0;
    if (c->plan.arena_bytes <= budget_ && best_fit_ && c->plan.recompute_cost() >= best_fit_->plan.recompute_cost())
      return 1;
    if (!Fits(&*c)) {
      KeepSmallest(&*c, by);
      return -1;
    }
    best_fit_ = std::move(c);
    Found(by);
    return 1;
  }

  // The searches decide whole blocks and segments, so the plan they choose
  // may recompute a node that the budget could keep, or one that a cheaper
  // node could stand in for. On graphs of at most kKeepNodes forward nodes
  // (where a build is cheap), each recomputed node, most expensive first
  // (at most kKeepTries of them), is kept again where the plan still fits.
  // Then, on graphs of at most kExactCandidates drop candidates, swaps
  // (Swaps), then moves of one node repaired by the bound (RepairedMoves).
  TrainingPlan KeepWhatFits(TrainingPlan best) {
    if (fwd_.num_nodes() > kKeepNodes) return best;
    best = KeepAgain(std::move(best));
    std::vector<int> candidates = DropCandidates(fwd_);
    if (candidates.size() > kExactCandidates) return best;
    CostliestFirst(&candidates);
    return RepairedMoves(Swaps(std::move(best), candidates), candidates);
  }

  // Rounds of swaps while one recomputes less (at most kSwapBuilds builds
  // and kSwapMisfits misfits): each recomputed node, most expensive first,
  // kept and a cheaper candidate (candidates: the most expensive first)
  // dropped instead where the plan fits.
  TrainingPlan Swaps(TrainingPlan best, const std::vector<int>& candidates) {
    const Allowance stop{q_.builds + kSwapBuilds, misfits_ + kSwapMisfits};
    for (bool improved = true; improved;) {
      improved = false;
      for (int i : Recomputed(best)) {
        for (int j : candidates) {
          if (best.keep[j] != 0 || Cost(j) >= Cost(i)) continue;
          if (Spent(stop)) return best;
          KeepLevels keep = best.keep;
          keep[i] = 0;
          keep[j] = kDropped;
          keep = ApplyAnnotations(fwd_, keep);
          if (CannotFit(keep)) continue;
          TrainingPlan c = q_.Build(std::move(keep));
          if (c.plan.recompute_cost() < best.plan.recompute_cost() && Fits(&c)) {
            best = std::move(c);
            Improved("swaps");
            improved = true;
            break;
          }
        }
      }
    }
    return best;
  }

  // What the BackwardReads bound exceeds `target` by, summed over share's
  // steps: what a drop set must still free.
  int64_t Excess(const KeepLevels& keep, int64_t target) const {
    int64_t sum = 0;
    for (int64_t h : backward_reads_.Held(fwd_, keep)) sum += std::max<int64_t>(0, h - target);
    return sum;
  }

  // One-level keep levels whose bound fits `target`, from `keep` with
  // `fixed`'s level left as it is: drops added one move at a time, the most
  // excess freed per predicted cost first (a move: a candidate, or a
  // candidate and the kept candidates it reads: a relu's gradient reads
  // only its output, so dropping either alone frees nothing), then each
  // dropped node, the costliest first (candidates: in that order), kept
  // again where the bound still fits. Nothing where no move frees more.
  std::optional<KeepLevels> DropByBound(KeepLevels keep, const std::vector<bool>& fixed, int64_t target,
                                        const std::vector<int>& candidates) const {
    std::vector<bool> is_candidate(fwd_.num_nodes(), false);
    for (int j : candidates) is_candidate[j] = !fixed[j];
    for (int64_t excess = Excess(keep, target); excess > 0;) {
      const double now = Predicted(keep);
      std::vector<int> best_move;
      double best_score = 0;
      int64_t best_excess = excess;
      for (int j : candidates) {
        if (!is_candidate[j] || keep[j] != 0) continue;
        std::vector<std::vector<int>> moves{{j}, {j}};
        for (const Entry& in : fwd_.node(j).inputs)
          if (is_candidate[in.node] && keep[in.node] == 0) moves[1].push_back(in.node);
        if (moves[1].size() == 1) moves.pop_back();
        for (const std::vector<int>& move : moves) {
          for (int m : move) keep[m] = kDropped;
          const int64_t e = Excess(keep, target);
          const double score = static_cast<double>(excess - e) / std::max(Predicted(keep) - now, 1e-12);
          for (int m : move) keep[m] = 0;
          if (e < excess && score > best_score) best_move = move, best_score = score, best_excess = e;
        }
      }
      if (best_move.empty()) return std::nullopt;
      for (int m : best_move) keep[m] = kDropped;
      excess = best_excess;
    }
    for (int j : candidates) {
      if (fixed[j] || keep[j] != kDropped) continue;
      keep[j] = 0;
      if (Excess(keep, target) > 0) keep[j] = kDropped;
    }
    return keep;
  }

  // Local moves on a one-level plan, while one recomputes less (at most
  // kRepairBuilds builds and kRepairMisfits misfits): each node the plan
  // recomputes, most expensive first (at most kKeepTries), kept again and
  // what the bound then needs dropped instead; where none improves, each
  // kept candidate dropped and what the bound then no longer needs kept
  // again (both by Repair, the moved node fixed). Keeping one node may need
  // several cheaper ones dropped instead, which one-for-one swaps never
  // reach; the greedy by the bound finds them without a build per try.
  // kRepairMisfits bounds the placements that miss (each runs the
  // placement's whole local search). Run after the swaps, it only improves
  // on their plan.
  TrainingPlan RepairedMoves(TrainingPlan best, const std::vector<int>& candidates) {
    if (!OneLevel(best.keep)) return best;
    const Allowance stop{q_.builds + kRepairBuilds, misfits_ + kRepairMisfits};
    auto move = [&](int node, int level) {
      KeepLevels keep = best.keep;
      keep[node] = level;
      std::vector<bool> fixed(fwd_.num_nodes(), false);
      fixed[node] = true;
      return Repair(std::move(keep), std::move(fixed), budget_, kRepairs, stop, candidates, &best);
    };
    for (bool improved = true; improved && !Spent(stop);) {
      improved = false;
      for (int i : Recomputed(best, kKeepTries))
        if ((improved = move(i, 0))) break;
      for (int j : candidates)
        if (!improved && best.keep[j] == 0 && (improved = move(j, kDropped))) break;
    }
    return best;
  }

  // Keep levels made to fit the bound at `target` (DropByBound, the `fixed`
  // nodes left as they are), built where they are predicted to recompute
  // less than *best, which they replace where they fit. Where they miss the
  // budget, repaired again (`repairs` times at most, within `stop`) with
  // the target lowered by the miss (the bound's target was the budget, and
  // the arena exceeds the bound by about that much); where the built
  // graph's live bytes peak at a mirror's step (its workspace and the
  // mirrors made for the same step are not in the bound), first with that
  // mirror's node kept, then by the lowered target alone (either may be
  // the one that fits), unless the configuration marks it to be dropped
  // (not a candidate).
  // Whether *best was replaced.
  bool Repair(KeepLevels keep, std::vector<bool> fixed, int64_t target, int repairs, const Allowance& stop,
              const std::vector<int>& candidates, TrainingPlan* best) {
    std::optional<KeepLevels> k = DropByBound(std::move(keep), fixed, target, candidates);
    if (!k || Predicted(*k) >= best->plan.recompute_cost() || Spent(stop)) return false;
    TrainingPlan c = q_.Build(ApplyAnnotations(fwd_, *k));
    if (Fits(&c)) {
      if (c.plan.recompute_cost() >= best->plan.recompute_cost()) return false;
      *best = std::move(c);
      Improved("repaired moves");
      return true;
    }
    if (repairs == 0) return false;
    const int64_t miss = c.plan.arena_bytes - budget_;
    const int peak = c.plan.peak_step;
    const int mirror_of = peak < c.graph.num_nodes() ? c.graph.node(peak).mirror_of : -1;
    const bool candidate = std::find(candidates.begin(), candidates.end(), mirror_of) != candidates.end();
    if (c.plan.lower_bound_bytes > budget_ && candidate && !fixed[mirror_of]) {
      KeepLevels kept = *k;
      kept[mirror_of] = 0;
      std::vector<bool> also = fixed;
      also[mirror_of] = true;
      if (Repair(std::move(kept), std::move(also), target, repairs - 1, stop, candidates, best)) return true;
    }
    return Repair(std::move(*k), std::move(fixed), target - miss, repairs - 1, stop, candidates, best);
  }

  // The nodes a plan recomputes, most expensive first (the first at_most).
  std::vector<int> Recomputed(const TrainingPlan& t, size_t at_most = SIZE_MAX) const {
    std::vector<int> out;
    for (const Node& n : t.graph.nodes())
      if (n.mirror_of >= 0 && t.keep[n.mirror_of] != 0) out.push_back(n.mirror_of);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    CostliestFirst(&out);
    if (out.size() > at_most) out.resize(at_most);
    return out;
  }

  // A forward node's recomputation cost; keep levels' predicted one.
  double Cost(int i) const { return RecomputeCost(fwd_, i, s_.costs.get()); }
  double Predicted(const KeepLevels& keep) const { return PredictedRecomputeCost(fwd_, keep, reads_, s_.costs.get()); }
  void CostliestFirst(std::vector<int>* nodes) const {
    std::stable_sort(nodes->begin(), nodes->end(), [&](int a, int b) { return Cost(a) > Cost(b); });
  }

  // Each node the plan recomputes, most expensive first (at most
  // kKeepTries), kept again where the plan still fits.
  TrainingPlan KeepAgain(TrainingPlan best) {
    for (int i : Recomputed(best, kKeepTries)) {
      KeepLevels keep = best.keep;
      keep[i] = 0;
      keep = ApplyAnnotations(fwd_, keep);
      if (CannotFit(keep)) continue;
      TrainingPlan c = q_.Build(std::move(keep));
      if (c.plan.recompute_cost() >= best.plan.recompute_cost() || !Fits(&c)) continue;
      best = std::move(c);
      Improved("kept again");
    }
    return best;
  }

  // (a) drop_cheap with the fewest sqrt segments recomputed whole, ranked
  // by bytes freed per cost, whose lower bound fits, then the first count
  // from there whose placed arena fits. Keeps the sqrt plan for step 3.
  // The fewest that fit are at least the fewest whose BackwardReads bound
  // does (bisected without a build), and mostly those: the counts from
  // there are tried 1, 2, 4, ... further until one fits, then bisected back
  // (the 4x1024 LSTM at T=4096, its 10% budget: one build where bisecting
  // every count built five, and the winner built again).
  void SqrtSegments(const KeepLevels& cheap) {
    int64_t b = 0;
    sqrt_ = BestSqrt(q_, backward_reads_, &b);
    const std::vector<Segment> segs = Segments(fwd_, cheap, b, s_.costs.get());
    const size_t n = segs.size();
    size_t lo = 1, hi = n;  // to the fewest whose bound fits
    while (lo <= hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (CannotFit(DropSegments(cheap, segs, mid)))
        lo = mid + 1;
      else
        hi = mid - 1;
    }
    // Counts up to `fails` do not fit; `fit`, of fit_count segments, does (its lower bound).
    size_t fails = lo - 1, fit_count = n + 1;
    std::optional<TrainingPlan> fit;
    auto try_count = [&](size_t k) {
      TrainingPlan t = q_.Build(DropSegments(cheap, segs, k));
      if (t.plan.arena_bytes > budget_) {
        fails = k;
      } else {
        fit = std::move(t);
        fit_count = k;
      }
    };
    for (size_t step = 1; !fit && fails < n; step *= 2) try_count(std::min(fails + step, n));
    while (fit_count - fails > 1) try_count(fails + (fit_count - fails) / 2);
    for (size_t k = fit_count; k <= n; ++k) {
      KeepLevels keep = DropSegments(cheap, segs, k);
      if (CannotFit(keep)) continue;
      TrainingPlan m = k == fit_count ? std::move(*fit) : q_.Build(std::move(keep));
      if (m.plan.recompute_cost() > sqrt_.plan.recompute_cost()) break;  // sqrt recomputes less from here on
      if (Consider(std::move(m), "drop_cheap with sqrt segments recomputed") > 0) break;
    }
  }

  // (b) The block program (chain.cc) under a model memory, corrected against
  // the built plans. The model prices each block's entries by the bound of
  // the plans that give every block that entry, so the memory it is given
  // starts at the budget and moves by what the plan it chose then holds
  // under or over the budget (its BackwardReads bound, or its placed arena
  // where that misses), within the bracket of the largest model memory
  // known to fit and the smallest known to miss (halved where a move
  // leaves it or the plan repeats one seen before), until the bracket is
  // 1/512 of the model memory wide (kCorrections rounds at most). Each
  // plan is built and placed where its bound fits and it is predicted to
  // recompute less than the best fit (PredictedRecomputeCost; Held).
  void BlockProgram(const std::vector<ChainBlock>& chain) {
    std::vector<std::pair<KeepLevels, int64_t>> seen;  // each plan's keep levels and what it holds
    int64_t fits = 0, misses = INT64_MAX;              // model memories known to fit, to miss
    int64_t model = budget_;
    for (int round = 0; round < kCorrections && misses - fits > std::max<int64_t>(1, model / 512); ++round) {
      const ChainPlan p = ChainRecompute(chain, model);
      const size_t plans = seen.size();
      const int64_t held = p.empty() ? 0 : Held(ChainLevels(fwd_, chain, p), &seen);
      const bool repeated = !p.empty() && seen.size() == plans;
      VLOG(1) << "block program: model memory " << model << ", plan cost " << (p.empty() ? 0 : ChainCost(chain, p))
              << ", holds " << held << " of " << budget_;
      (held <= budget_ ? fits : misses) = model;  // nothing fits the model (held 0): it needs more memory
      const int64_t moved = p.empty() ? model * 2 : model + (budget_ - held);
      const bool inside = moved > fits && moved < misses && !repeated;
      model = inside ? moved : misses == INT64_MAX ? model * 2 : fits + (misses - fits) / 2;
    }
  }

  // What a plan of the block program holds, against the budget: its
  // BackwardReads bound, or, where that fits and it may recompute less
  // than the best fit, its built plan's lower bound where it fits (then the
  // best fit where it recomputes less) or its placed arena where it misses.
  int64_t Held(KeepLevels keep, std::vector<std::pair<KeepLevels, int64_t>>* seen) {
    for (const auto& [k, held] : *seen)
      if (k == keep) return held;
    int64_t held = backward_reads_.Bound(fwd_, keep);
    if (held <= budget_ && !CannotWin(keep)) {
      TrainingPlan t = q_.Build(keep);
      if (Fits(&t)) {
        held = t.plan.lower_bound_bytes;
        if (!best_fit_ || t.plan.recompute_cost() < best_fit_->plan.recompute_cost()) {
          best_fit_ = std::move(t);
          Found("the block program");
        }
      } else {
        held = t.plan.arena_bytes;
        KeepSmallest(&t, "the block program");
      }
    }
    seen->emplace_back(std::move(keep), held);
    return held;
  }

  // Whether keep levels' arena cannot fit: their BackwardReads bound (what
  // the share plan's steps hold under them) exceeds the budget.
  bool CannotFit(const KeepLevels& keep) const { return backward_reads_.Bound(fwd_, keep) > budget_; }

  // Whether keep levels are predicted to recompute no less than the best fit
  // (with a margin for the rounding of the sums' order).
  bool CannotWin(const KeepLevels& keep) const {
    if (!best_fit_) return false;
    return Predicted(keep) >= best_fit_->plan.recompute_cost() * (1 + 1e-9);
  }

  // On small graphs (at most kExactCandidates drop candidates), every
  // drop set cheaper than the best fit that could fit (CoverKeys,
  // drop_sets.cc), cheapest first, for at most
  // ExactSearchBuilds builds and kExactPlacements placements: the first
  // that fits is the optimum, and none fitting proves the best fit optimal.
  // Returns whether best_fit_ is then optimal.
  bool ExactDropSets() {
    std::vector<int> candidates = DropCandidates(fwd_);
    if (candidates.size() > kExactCandidates) return false;
    const double max_cost = best_fit_ ? best_fit_->plan.recompute_cost() - base_cost_ : INFINITY;
    DropSetSearch exact =
        CheapestFittingDrops(fwd_, q_.inputs, s_, q_.dev, ApplyAnnotations(fwd_, {}), std::move(candidates),
                             backward_reads_, budget_, max_cost, ExactSearchBuilds(fwd_), kExactPlacements);
    q_.builds += static_cast<int>(exact.builds);
    if (exact.plan) {
      best_fit_ = std::move(exact.plan);
      Found("the exact search");
    }
    return exact.exact && best_fit_;
  }

  Search& q_;
  const Graph& fwd_;
  const MemoryStrategy& s_;
  const int64_t budget_;
  std::vector<bool> reads_;       // GradientReads of the plans
  BackwardReads backward_reads_;  // of the share plan
  double base_cost_ = 0;
  std::optional<TrainingPlan> best_fit_;
  TrainingPlan smallest_;
  std::string smallest_by_ = "share";
  int misfits_ = 0;
  std::string found_by_;
  TrainingPlan sqrt_;  // BestSqrt's, where SqrtSegments ran
};

}  // namespace

TrainingPlan BuildTrainingPlan(const Graph& fwd, const Inputs& inputs, const MemoryStrategy& s, KeepLevels keep,
                               Device dev, bool estimate) {
  TrainingPlan t{fwd, {}, std::move(keep)};
  bool drops = std::any_of(t.keep.begin(), t.keep.end(), [](int l) { return l != 0; });
  Gradient(&t.graph, drops ? t.keep : KeepLevels{});
  InferShapes(&t.graph, inputs);
  if (dev.type == DeviceType::kCPU) ChooseLayouts(&t.graph);
  t.plan = PlanMemory(t.graph, s, estimate);
  return t;
}

// On two workers ops run side by side but where the arena orders them: the
// op that opens a block waits for the last readers of the blocks whose
// bytes it takes (EngineAccesses). The tighter the arena, the more it
// waits: on an LSTM of 2x256 over 128 steps the sqrt plan's step measured
// 400-446 ms, and 275-278 ms with no block's bytes reused within 6 steps of
// its death (docs/memory.md). So a recomputing plan that two workers run is
// placed again with a gap of 8 steps, else 6, else 4, wherever the lower
// bound allows (PlaceWithGap): the first whose arena stays within
// kSpreadArena of the bound (or no larger than before), and within a
// budget. Only on the CPU: a GPU's stream runs ops in push order anyway. A
// plan that recomputes nothing gained 3-4% in the schedule, not worth the
// placements.
constexpr double kSpreadArena = 1.02;
void Spread(TrainingPlan* t, const MemoryStrategy& s) {
  if (t->plan.num_recomputed == 0) return;
  int64_t allowed = std::max(t->plan.arena_bytes, static_cast<int64_t>(t->plan.lower_bound_bytes * kSpreadArena));
  if (s.kind == MemoryStrategy::kBudget) allowed = std::min(allowed, std::max(t->plan.arena_bytes, s.budget_bytes));
  for (int gap : {8, 6, 4})
    if (PlaceWithGap(t->graph, gap, allowed, &t->plan)) return;
}

TrainingPlan PlanTraining(const Graph& fwd, const Inputs& inputs, const MemoryStrategy& s, Device dev,
                          const std::function<int(const Graph& train)>& workers) {
  auto t0 = std::chrono::steady_clock::now();
  Search q{fwd, inputs, s, dev};
  TrainingPlan t;
  std::string found_by = s.Name();  // a budget search says which of its steps
  switch (s.kind) {
    case MemoryStrategy::kNone:
    case MemoryStrategy::kInplace:
    case MemoryStrategy::kShare: t = q.Build(ApplyAnnotations(fwd, {})); break;
    case MemoryStrategy::kDropCheap: t = q.Build(DropCheapLevels(fwd)); break;
    case MemoryStrategy::kSqrt: {
      const TrainingPlan share = q.Build(ApplyAnnotations(fwd, {}));
      t = BestSqrt(q, BackwardReadsOf(fwd, share));
      break;
    }
    case MemoryStrategy::kLogn: t = q.Build(LognLevels(fwd)); break;
    case MemoryStrategy::kBudget:
      BudgetSearch search(q);
      t = search.Run();
      found_by = search.found_by();
      if (t.plan.arena_bytes > t.plan.lower_bound_bytes) t = Finish(std::move(t), s);  // placed until it fit
      break;
  }
  if (s.shares() && t.plan.entry_offset.empty()) t = Finish(std::move(t), s);  // searched on estimates
  // A GPU's one stream runs ops in push order: nothing to spread.
  if (s.shares() && dev.type == DeviceType::kCPU && workers && workers(t.graph) >= 2) Spread(&t, s);
  t.plan.strategy = s;
  if (s.costs) t.plan.step_ms = s.costs->StepMs(t.graph, t.plan);  // the plan returned only: a schedule is not cheap
  t.plan.num_builds = q.builds;
  t.plan.found_by = found_by;
  t.plan.plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

}  // namespace frugal
