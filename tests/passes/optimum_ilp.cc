// The exact reference as an integer program (issue 18 §4: "an ILP in the
// style of Checkmate", solved with Debian's coinor-cbc). Where
// CheapestFittingDrops takes drop sets in order of cost and rules out those
// whose BackwardReads bound exceeds the budget one by one (millions of
// cheap relu and BatchNorm sets on ResNet-20), the program's rows are a
// linear form of that bound at every step of share's training graph, so
// the solver's least-cost set already frees enough everywhere the form
// sees; the set is then checked exactly (the whole bound, the built
// graph's lower bound, the placement), and a set that does not fit is cut
// off and the program solved again.
#include <Cbc_C_Interface.h>
#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "frugal/passes/costs.h"
#include "frugal/passes/memory_plan.h"
#include "frugal/passes/recompute.h"
#include "frugal/passes/training_plan.h"
#include "passes/optimum.h"

namespace frugal {
namespace test {
namespace {

// A linear form over the program's columns: constant + sum of coef x col.
struct Linear {
  double constant = 0;
  std::vector<std::pair<int, double>> terms;
};

// A 0-1 program: minimize the objective subject to rows `form <= rhs`.
class Program {
 public:
  // A column in [0, 1].
  int AddColumn(double objective, bool integer) {
    columns_.push_back({objective, integer});
    return static_cast<int>(columns_.size()) - 1;
  }
  // form <= rhs; a column's terms summed (CBC takes each column once a row).
  void AddRow(const Linear& form, double rhs) {
    std::map<int, double> sum;
    for (auto [col, coef] : form.terms) sum[col] += coef;
    Row row{{}, rhs - form.constant};
    for (auto [col, coef] : sum)
      if (coef != 0) row.terms.push_back({col, coef});
    rows_.push_back(std::move(row));
  }
  // The columns' values at an optimum; nullopt when no point satisfies the rows.
  std::optional<std::vector<double>> Solve() const {
    Cbc_Model* model = Cbc_newModel();
    Cbc_setLogLevel(model, 0);
    Cbc_setAllowableFractionGap(model, 0);
    Cbc_setAllowableGap(model, 1e-9);
    for (const Column& c : columns_) Cbc_addCol(model, "", 0, 1, c.objective, c.integer, 0, 0, 0);
    for (const Row& r : rows_) {
      std::vector<int> cols;
      std::vector<double> coefs;
      for (auto [col, coef] : r.terms) cols.push_back(col), coefs.push_back(coef);
      Cbc_addRow(model, "", static_cast<int>(cols.size()), cols.data(), coefs.data(), 'L', r.rhs);
    }
    Cbc_solve(model);
    std::optional<std::vector<double>> out;
    if (Cbc_isProvenOptimal(model)) {
      const double* x = Cbc_getColSolution(model);
      out.emplace(x, x + columns_.size());
    } else {
      CHECK(Cbc_isProvenInfeasible(model))
          << "CBC neither solved nor proved infeasible (status " << Cbc_status(model) << ")";
    }
    Cbc_deleteModel(model);
    return out;
  }

 private:
  struct Column {
    double objective;
    bool integer;
  };
  struct Row {
    std::vector<std::pair<int, double>> terms;
    double rhs;
  };
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

// BackwardReads::Held (build_training_plan.h) at every step of share, as a
// linear form over the program's columns: d_i, node i dropped (a
// candidate's column, or base's level); r_i, at least 1 where i is
// recomputed (r_i >= d_i where the backward pass reads i, r_i >= r_j +
// d_i - 1 for each reader j); u and v per node
// and step where its mirror can be made (below), at most and at least
// whether it is made by then; and per output and range of steps a column,
// forced to 1 where one of Held's terms holds the output there: kept, from
// its step to its last backward reader, and on to the step before a
// recomputed reader's mirror is made; dropped, from the step its mirror is
// made to its last backward reader. With the forced columns at their
// least, the form is Held at every step (Evaluate; the tests compare them
// on every drop set of the tiny graphs). Bytes in KiB.
class HeldForm {
 public:
  HeldForm(const Graph& fwd, const BackwardReads& reads, const KeepLevels& base, const std::vector<int>& cand,
           const std::vector<double>& cost, Program* p)
      : fwd_(fwd), reads_(reads), base_(base), d_(fwd.num_nodes(), -1), r_(fwd.num_nodes(), -1) {
    const int n = fwd.num_nodes();
    for (size_t k = 0; k < cand.size(); ++k) d_[cand[k]] = Column(p, cost[k] * 1e-6, true);  // MFLOP
    std::vector<std::vector<Entry>> readers(n);  // [node]: (reader, output index)
    for (int j = 0; j < n; ++j)
      for (const Entry& e : fwd.node(j).inputs) readers[e.node].push_back({j, e.index});
    // Where a dropped node's mirror can be made: the first backward
    // readers' steps of the read nodes it reaches through droppable
    // readers (itself included), ascending. It is made at the earliest of
    // those reached through dropped ones (BackwardReads::Held's `made`), so
    // at or before such a step exactly where it reaches one there: u is at
    // most that (its rows: a path of dropped nodes), v at least.
    thresholds_.resize(n);
    u_.resize(n);
    v_.resize(n);
    for (int i = n - 1; i >= 0; --i) {
      if (!Droppable(i)) continue;
      std::vector<int>& tau = thresholds_[i];
      if (reads.read[i]) tau.push_back(reads.first[i]);
      for (const Entry& e : readers[i])
        if (Droppable(e.node)) tau.insert(tau.end(), thresholds_[e.node].begin(), thresholds_[e.node].end());
      std::sort(tau.begin(), tau.end());
      tau.erase(std::unique(tau.begin(), tau.end()), tau.end());
      r_[i] = Column(p, 0, false);
      for (size_t m = 0; m < tau.size(); ++m)
        u_[i].push_back(Column(p, 0, false)), v_[i].push_back(Column(p, 0, false));
    }
    for (int i = 0; i < n; ++i) {
      if (!Droppable(i)) continue;
      if (reads.read[i]) p->AddRow(Sum(Dropped(i), Col(r_[i], -1)), 0);  // r_i >= d_i
      std::vector<int> dropped_readers;
      for (const Entry& e : readers[i])
        if (Droppable(e.node)) dropped_readers.push_back(e.node);
      std::sort(dropped_readers.begin(), dropped_readers.end());
      dropped_readers.erase(std::unique(dropped_readers.begin(), dropped_readers.end()), dropped_readers.end());
      for (int j : dropped_readers) p->AddRow(Sum(Sum(Dropped(i), Col(r_[j], 1)), Col(r_[i], -1)), 1);
      for (size_t m = 0; m < thresholds_[i].size(); ++m) {
        const int tau = thresholds_[i][m];
        const bool here = reads.read[i] && reads.first[i] <= tau;
        const int u = u_[i][m], v = v_[i][m];
        p->AddRow(Sum(Col(u, 1), Times(Dropped(i), -1)), 0);  // u <= d_i
        Linear paths{here ? -1. : 0., {{u, 1}}};              // u <= here + the readers' u
        if (here) p->AddRow(Sum(Dropped(i), Col(v, -1)), 0);  // v >= d_i
        for (int j : dropped_readers) {
          const int at = At(j, tau);
          if (at < 0) continue;
          paths.terms.push_back({u_[j][at], -1});
          p->AddRow(Sum(Sum(Col(v_[j][at], 1), Dropped(i)), Col(v, -1)), 1);  // v >= v_j + d_i - 1
        }
        p->AddRow(paths, 0);
      }
    }
    held_.assign(reads.held_anyway.size(), Linear{});
    for (size_t t = 0; t < held_.size(); ++t) held_[t].constant = Kib(reads.held_anyway[t]);
    for (int i = 0; i < n; ++i) {
      if (fwd.node(i).is_variable()) continue;
      for (int o = reads.output_of[i]; o < reads.output_of[i + 1]; ++o) {
        const BackwardReads::Output& out = reads.outputs[o];
        std::vector<Trigger> triggers;
        if (out.last >= 0) {
          Hold(i, out.last, Times(Kept(i), Kib(out.bytes)));
          if (reads.read[i]) Hold(reads.first[i], out.last, Times(Dropped(i), Kib(out.bytes)));
        }
        const int from = out.last >= 0 ? out.last + 1 : i + 1;  // kept, on past its last reader
        const int end = static_cast<int>(reads.held_anyway.size()) - 1;
        std::vector<int> done;
        for (const Entry& e : readers[i]) {
          const int j = e.node;
          if (e.index != o - reads.output_of[i] || !Droppable(j) || thresholds_[j].empty()) continue;
          if (std::find(done.begin(), done.end(), j) != done.end()) continue;
          done.push_back(j);
          // Kept and read by j recomputed: held until the step before j's mirror is made.
          const std::vector<int>& tau = thresholds_[j];
          const Linear held = Sum(Sum(Kept(i), Col(r_[j], 1)), {-1, {}});
          triggers.push_back({from, tau[0] - 1, held});
          for (size_t m = 0; m < tau.size(); ++m)
            triggers.push_back(
                {std::max(from, tau[m]), m + 1 < tau.size() ? tau[m + 1] - 1 : end, Sum(held, Col(u_[j][m], -1))});
        }
        if (out.last >= 0 && reads.read[i]) {  // dropped: held from the step its mirror is made
          const std::vector<int>& tau = thresholds_[i];
          for (size_t m = 0; m < tau.size() && tau[m] < reads.first[i]; ++m)
            triggers.push_back(
                {tau[m], std::min(m + 1 < tau.size() ? tau[m + 1] : INT_MAX, reads.first[i]) - 1, Col(v_[i][m], 1)});
        }
        HoldIfAny(triggers, out.bytes, p);
      }
    }
  }

  // Rows: what each step holds fits the budget.
  void AddRows(int64_t budget, Program* p) const {
    for (const Linear& h : held_) p->AddRow(h, Kib(budget));
  }

  // The drop set of the columns' values.
  KeepLevels Keep(const std::vector<double>& x) const {
    KeepLevels keep = base_;
    for (int i = 0; i < fwd_.num_nodes(); ++i)
      if (d_[i] >= 0 && x[d_[i]] > 0.5) keep[i] = kDropped;
    return keep;
  }

  // A row no other set violates: at least one candidate differs from keep.
  void CutOff(const KeepLevels& keep, Program* p) const {
    Linear row;
    for (int i = 0; i < fwd_.num_nodes(); ++i) {
      if (d_[i] < 0) continue;
      const bool dropped = keep[i] == kDropped;
      row.terms.push_back({d_[i], dropped ? 1.0 : -1.0});
      row.constant -= dropped;
    }
    p->AddRow(row, -1);  // sum over dropped d - sum over kept d <= |dropped| - 1
  }

  // BackwardReads::Held, at each step.
  std::vector<int64_t> Exact(const KeepLevels& keep) const { return reads_.Held(fwd_, keep); }

  // The form's bytes at each step for keep, its forced columns at their
  // least: never above Exact.
  std::vector<int64_t> Evaluate(const KeepLevels& keep) const {
    const std::vector<bool> recomputed = RecomputedNodes(fwd_, keep, reads_.read);
    const int n = fwd_.num_nodes();
    std::vector<int> made(n, INT_MAX);  // as BackwardReads::Held's
    for (int i = n - 1; i >= 0; --i) {
      if (keep[i] == 0) continue;
      if (reads_.read[i]) made[i] = std::min(made[i], reads_.first[i]);
      if (made[i] == INT_MAX) continue;
      for (const Entry& e : fwd_.node(i).inputs) made[e.node] = std::min(made[e.node], made[i]);
    }
    std::vector<double> x(forces_.size(), 0);
    for (int i = 0; i < n; ++i) {
      if (d_[i] >= 0) x[d_[i]] = keep[i] == kDropped;
      if (r_[i] >= 0) x[r_[i]] = recomputed[i];
      for (size_t m = 0; m < thresholds_[i].size(); ++m)
        x[u_[i][m]] = x[v_[i][m]] = keep[i] != 0 && made[i] <= thresholds_[i][m];
    }
    for (size_t col = 0; col < forces_.size(); ++col)
      for (const Linear& f : forces_[col]) x[col] = std::max(x[col], Value(f, x));
    std::vector<int64_t> held;
    for (const Linear& h : held_) held.push_back(std::llround(Value(h, x) * 1024));
    return held;
  }

 private:
  // Bytes held over steps [from, to] where force >= 1.
  struct Trigger {
    int from, to;
    Linear force;
  };
  int Column(Program* p, double objective, bool integer) {
    forces_.emplace_back();
    return p->AddColumn(objective, integer);
  }
  // bytes held at each step where one of the triggers covering it holds: a
  // column per range between their ends.
  void HoldIfAny(const std::vector<Trigger>& triggers, int64_t bytes, Program* p) {
    std::vector<int> cuts;
    for (const Trigger& t : triggers)
      if (t.from <= t.to) cuts.push_back(t.from), cuts.push_back(t.to + 1);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      int y = -1;
      for (const Trigger& t : triggers) {
        if (t.from > cuts[k] || t.to < cuts[k + 1] - 1) continue;
        if (y < 0) y = Column(p, 0, false);
        p->AddRow(Sum(t.force, Col(y, -1)), 0);  // y >= force
        forces_[y].push_back(t.force);
      }
      if (y >= 0) Hold(cuts[k], cuts[k + 1] - 1, Col(y, Kib(bytes)));
    }
  }
  // The index of k's largest threshold at most tau; -1 where none is.
  int At(int k, int tau) const {
    const std::vector<int>& t = thresholds_[k];
    return static_cast<int>(std::upper_bound(t.begin(), t.end(), tau) - t.begin()) - 1;
  }
  bool Droppable(int i) const { return d_[i] >= 0 || (!fwd_.node(i).is_variable() && base_[i] == kDropped); }
  Linear Dropped(int i) const { return d_[i] >= 0 ? Col(d_[i], 1) : Linear{base_[i] == kDropped ? 1. : 0., {}}; }
  Linear Kept(int i) const { return Sum({1, {}}, Times(Dropped(i), -1)); }
  static Linear Col(int col, double coef) { return {0, {{col, coef}}}; }
  static double Kib(int64_t bytes) { return static_cast<double>(bytes) / 1024; }
  static double Value(const Linear& f, const std::vector<double>& x) {
    double v = f.constant;
    for (auto [col, coef] : f.terms) v += coef * x[col];
    return v;
  }
  static Linear Times(Linear f, double k) {
    f.constant *= k;
    for (auto& term : f.terms) term.second *= k;
    return f;
  }
  static Linear Sum(Linear a, const Linear& b) {
    a.constant += b.constant;
    a.terms.insert(a.terms.end(), b.terms.begin(), b.terms.end());
    return a;
  }
  void Hold(int from, int to, const Linear& f) {
    for (int t = std::max(from, 0); t <= to && t < static_cast<int>(held_.size()); ++t) held_[t] = Sum(held_[t], f);
  }

  const Graph& fwd_;
  const BackwardReads& reads_;
  const KeepLevels& base_;
  std::vector<int> d_, r_;
  std::vector<std::vector<int>> thresholds_, u_, v_;  // [node]
  std::vector<std::vector<Linear>> forces_;           // [column]: what forces it (y), empty for d and r
  std::vector<Linear> held_;                          // [step of share]
};

// The program of a case: its candidates, their costs, what share's
// backward pass reads, and the form over them.
struct CaseProgram {
  explicit CaseProgram(const GapCase& c)
      : base(ApplyAnnotations(c.fwd, {})), cand(DropCandidates(c.fwd)), reads(ShareReads(c)) {
    CHECK(OneLevel(base)) << c.name << ": the program is of one-level plans";
    for (int i : cand) cost.push_back(RecomputeCost(c.fwd, i, nullptr));
    held.emplace(c.fwd, reads, base, cand, cost, &program);
  }
  KeepLevels base;
  std::vector<int> cand;
  std::vector<double> cost;
  BackwardReads reads;
  Program program;
  std::optional<HeldForm> held;
};

}  // namespace

ProgramHeld IlpHeld(const GapCase& c, const KeepLevels& keep) {
  const CaseProgram p(c);
  return {p.held->Evaluate(keep), p.held->Exact(keep)};
}

DropSetSearch IlpOptimalDrops(const GapCase& c, int64_t budget, int64_t max_programs) {
  const Graph& fwd = c.fwd;
  const MemoryStrategy share(MemoryStrategy::kShare);
  CaseProgram p(c);
  const std::vector<int>& cand = p.cand;
  const std::vector<double>& cost = p.cost;
  const HeldForm& held = *p.held;
  Program& program = p.program;
  DropSetSearch r;
  ++r.builds;  // share's
  held.AddRows(budget, &program);
  for (;;) {
    if (r.subsets >= max_programs) return r;  // cut off: r.cost, the last optimum of the program, bounds the optimum
    ++r.subsets;
    const std::optional<std::vector<double>> x = program.Solve();
    if (!x) {  // no set left that could fit
      r.exact = true;
      return r;
    }
    KeepLevels keep = held.Keep(*x);
    r.cost = 0;
    for (size_t k = 0; k < cand.size(); ++k) r.cost += keep[cand[k]] == kDropped ? cost[k] : 0;
    const std::vector<int64_t> form = held.Evaluate(keep), exact = held.Exact(keep);
    for (size_t t = 0; t < form.size(); ++t)
      CHECK_LE(form[t], exact[t]) << c.name << ": the program holds more than BackwardReads at step " << t
                                  << " (dropping " << Dropped(fwd, keep) << ")";
    const int64_t bound = *std::max_element(exact.begin(), exact.end());
    if (bound <= budget) {
      ++r.builds;
      TrainingPlan t = BuildTrainingPlan(fwd, c.inputs, share, keep, {}, /*estimate=*/true);
      CHECK_LE(bound, t.plan.arena_bytes) << c.name << ": BackwardReads' bound is no lower bound"
                                          << " (dropping " << Dropped(fwd, keep) << ")";
      if (t.plan.arena_bytes <= budget) {
        ++r.placed;
        t.plan = PlanMemory(t.graph, share, /*estimate=*/false, /*fit_bytes=*/budget);
        if (t.plan.arena_bytes <= budget) {
          r.exact = true;
          r.plan = std::move(t);
          return r;
        }
      }
    }
    held.CutOff(keep, &program);
  }
}

}  // namespace test
}  // namespace frugal
