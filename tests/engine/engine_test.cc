// The engine contract on both engines (order per variable, errors at the
// wait, asynchronous functions, deleting variables), and what only the
// threaded engine does (reads together, priorities, the I/O thread, device
// workers, kernel threads).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "backend/cpu/parallel.h"
#include "frugal/engine.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace frugal {
namespace {

using namespace std::chrono_literals;

// A gate that functions wait on until the test opens it (with a deadline,
// so a broken engine fails the test instead of hanging it).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> gate_lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool Wait() {
    std::unique_lock<std::mutex> gate_lock(mu_);
    return cv_.wait_for(gate_lock, 10s, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Engine> e = MakeEngine(GetParam(), {2, 1});
};

TEST_P(EngineTest, WritesOfOneVariableRunInPushOrder) {
  Var v = e->NewVar();
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) e->Push([&order, i] { order.push_back(i); }, {}, {v}, {});
  e->WaitForVar(v);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST_P(EngineTest, ReadsSeeTheWriteBeforeThemAndWritesWaitForReads) {
  Var v = e->NewVar();
  int x = 0;
  std::atomic<int> seen_one{0}, seen_two{0};
  e->Push(
      [&] {
        std::this_thread::sleep_for(5ms);
        x = 1;
      },
      {}, {v}, {});
  for (int i = 0; i < 4; ++i) e->Push([&] { seen_one += x == 1; }, {v}, {}, {});
  e->Push([&] { x = 2; }, {}, {v}, {});
  for (int i = 0; i < 4; ++i) e->Push([&] { seen_two += x == 2; }, {v}, {}, {});
  e->WaitAll();
  EXPECT_EQ(seen_one, 4);
  EXPECT_EQ(seen_two, 4);
}

TEST_P(EngineTest, ErrorSurfacesAtWaitWithTheOpName) {
  Var v = e->NewVar();
  bool later_ran = false;
  PushOptions opts;
  opts.name = "fc7";
  e->Push([] { throw Error("label 12 out of range"); }, {}, {v}, opts);
  e->Push([&] { later_ran = true; }, {v}, {}, {});
  try {
    e->WaitAll();
    FAIL() << "no error";
  } catch (const Error& err) { EXPECT_STREQ(err.what(), "fc7: label 12 out of range"); }
  EXPECT_FALSE(later_ran) << "work after a failure must not run";
  e->WaitAll();  // the error is reported once
  // The engine works again after the error was reported.
  int x = 0;
  e->Push([&] { x = 5; }, {}, {v}, {});
  e->WaitForVar(v);
  EXPECT_EQ(x, 5);
}

TEST_P(EngineTest, ErrorOfAnyExceptionTypeReachesWaitForVar) {
  Var v = e->NewVar();
  PushOptions opts;
  opts.name = "relu3";
  e->Push([] { throw std::runtime_error("bad alloc of the week"); }, {}, {v}, opts);
  EXPECT_THROW(
      {
        try {
          e->WaitForVar(v);
        } catch (const Error& err) {
          EXPECT_STREQ(err.what(), "relu3: bad alloc of the week");
          throw;
        }
      },
      Error);
  opts.name = "odd";
  e->Push([] { throw 42; }, {}, {v}, opts);
  try {
    e->WaitAll();
    FAIL() << "no error";
  } catch (const Error& err) { EXPECT_STREQ(err.what(), "odd: unknown exception"); }
}

TEST_P(EngineTest, OnlyTheFirstErrorIsKept) {
  Var a = e->NewVar(), b = e->NewVar();
  PushOptions first, second;
  first.name = "first";
  second.name = "second";
  e->Push([] { throw Error("one"); }, {}, {a}, first);
  e->Push([] { throw Error("two"); }, {}, {a}, second);  // skipped: it depends on the failure
  e->Push([] { throw Error("three"); }, {}, {b}, second);
  try {
    e->WaitAll();
    FAIL() << "no error";
  } catch (const Error& err) {
    // The threaded engine may run the function on b first; either way one error, named.
    std::string what = err.what();
    EXPECT_TRUE(what == "first: one" || what == "second: three") << what;
  }
  e->WaitAll();
}

// Calls the done handed to it from a thread of its own, after a delay.
class LateCompleter {
 public:
  LateCompleter(std::exception_ptr error = nullptr)
      : thread_([this, error] {
          Done done = handed_.get_future().get();
          std::this_thread::sleep_for(10ms);
          if (note) note("done");
          done(error);
        }) {}
  ~LateCompleter() { thread_.join(); }
  void Hand(Done done) { handed_.set_value(std::move(done)); }
  std::function<void(const std::string&)> note;  // set before Hand

 private:
  std::promise<Done> handed_;
  std::thread thread_;
};

TEST_P(EngineTest, AsyncFunctionHoldsItsVariablesUntilDone) {
  Var v = e->NewVar();
  std::vector<std::string> log;
  std::mutex log_mu;
  auto note = [&](const std::string& s) {
    std::lock_guard<std::mutex> log_lock(log_mu);
    log.push_back(s);
  };
  LateCompleter completer;
  completer.note = note;
  e->PushAsync(
      [&](Done done) {
        note("start");
        completer.Hand(done);
      },
      {}, {v}, {});
  e->Push([&] { note("reader"); }, {v}, {}, {});
  e->WaitAll();
  EXPECT_EQ(log, (std::vector<std::string>{"start", "done", "reader"}));
}

TEST_P(EngineTest, AsyncFunctionReportsAnError) {
  Var v = e->NewVar();
  PushOptions opts;
  opts.name = "allreduce";
  LateCompleter completer(std::make_exception_ptr(Error("peer 3 hung up")));
  e->PushAsync([&](Done done) { completer.Hand(done); }, {}, {v}, opts);
  try {
    e->WaitForVar(v);
    FAIL() << "no error";
  } catch (const Error& err) { EXPECT_STREQ(err.what(), "allreduce: peer 3 hung up"); }
}

// A denormal operand times one: 0 where the thread flushes denormals (DAZ),
// the denormal itself where it does not.
float DenormalTimesOne() {
  volatile float tiny = 1e-40f, one = 1.f;
  return tiny * one;
}

TEST_P(EngineTest, KernelsRunWithDenormalsFlushedOnEveryKernelThread) {
  ASSERT_NE(DenormalTimesOne(), 0.f) << "the test thread itself should not flush (else the test proves nothing)";
  std::vector<float> seen(8, -1.f);
  e->Push(
      [&] {
        seen[0] = DenormalTimesOne();
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
        seen[1 + omp_get_thread_num()] = DenormalTimesOne();
#endif
      },
      {}, {e->NewVar()}, {});
  e->WaitAll();
  EXPECT_EQ(seen[0], 0.f);
#ifdef _OPENMP
  EXPECT_EQ(seen[1], 0.f);
  EXPECT_EQ(seen[2], 0.f) << "an OpenMP thread of the kernel's team keeps denormals";
#endif
}

TEST_P(EngineTest, DeleteVarRunsPendingWorkFirst) {
  Var v = e->NewVar();
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i)
    e->Push(
        [&] {
          std::this_thread::sleep_for(1ms);
          ++ran;
        },
        {}, {v}, {});
  e->DeleteVar(v);
  e->WaitAll();
  EXPECT_EQ(ran, 5);
  Var w = e->NewVar();  // may reuse the slot, never the id
  EXPECT_NE(w, v);
  e->Push([&] { ++ran; }, {}, {w}, {});
  e->WaitForVar(w);
  EXPECT_EQ(ran, 6);
}

TEST_P(EngineTest, AVariableNamedTwiceCountsOnce) {
  Var v = e->NewVar();
  int x = 0;
  e->Push([&] { x += 1; }, {v, v}, {v, v}, {});
  e->Push([&] { x *= 10; }, {v}, {v}, {});
  e->WaitForVar(v);
  EXPECT_EQ(x, 10);
}

INSTANTIATE_TEST_SUITE_P(BothEngines, EngineTest, ::testing::Values("naive", "threaded"),
                         [](const auto& info) { return info.param; });

TEST(Engine, UnknownEngineNameAndBadOptions) {
  EXPECT_THROW(MakeEngine("turbo"), Error);
  EXPECT_THROW(MakeEngine("threaded", {-1, 0}), Error);
}

TEST(NaiveEngine, RunsAtPushTime) {
  auto e = MakeEngine("naive");
  int x = 0;
  e->Push([&] { x = 1; }, {}, {e->NewVar()}, {});
  EXPECT_EQ(x, 1);
  EXPECT_NE(e->Describe().find("naive"), std::string::npos);
}

TEST(ThreadedEngine, ReadsOfOneVariableRunTogether) {
  auto e = MakeEngine("threaded", {2, 1});
  Var v = e->NewVar();
  Gate both;
  std::atomic<int> started{0};
  std::atomic<bool> met{true};
  for (int i = 0; i < 2; ++i) {
    e->Push(
        [&] {
          if (++started == 2) both.Open();
          if (!both.Wait()) met = false;  // the other read never started
        },
        {v}, {}, {});
  }
  e->WaitAll();
  EXPECT_TRUE(met);
}

TEST(ThreadedEngine, WaitForVarWaitsOnlyForThatVariable) {
  auto e = MakeEngine("threaded", {2, 1});
  Var slow = e->NewVar(), fast = e->NewVar();
  Gate gate;
  e->Push([&] { gate.Wait(); }, {}, {slow}, {});
  int x = 0;
  e->Push([&] { x = 7; }, {}, {fast}, {});
  e->WaitForVar(fast);  // returns while `slow` is still blocked
  EXPECT_EQ(x, 7);
  gate.Open();
  e->WaitAll();
}

TEST(ThreadedEngine, HigherPriorityRunsFirstAmongReadyFunctions) {
  auto e = MakeEngine("threaded", {1, 1});
  Gate gate;
  std::atomic<bool> holding{false};
  e->Push(
      [&] {
        holding = true;
        gate.Wait();
      },
      {}, {e->NewVar()}, {});                  // holds the only worker
  while (!holding) std::this_thread::yield();  // else the worker may pick a prioritised one first
  std::vector<int> order;
  std::mutex mu;
  for (int p : {0, 5, -3, 9, 1}) {
    PushOptions o;
    o.priority = p;
    e->Push(
        [&, p] {
          std::lock_guard<std::mutex> order_lock(mu);
          order.push_back(p);
        },
        {}, {e->NewVar()}, o);
  }
  gate.Open();
  e->WaitAll();
  EXPECT_EQ(order, (std::vector<int>{9, 5, 1, 0, -3}));
}

TEST(ThreadedEngine, IoRunsOnItsOwnThreadWhileComputeIsBusy) {
  auto e = MakeEngine("threaded", {1, 1});
  Gate gate;
  std::thread::id compute_thread, io_thread;
  e->Push(
      [&] {
        compute_thread = std::this_thread::get_id();
        gate.Wait();
      },
      {}, {e->NewVar()}, {});
  PushOptions io;
  io.kind = FnKind::kIO;
  Var batch = e->NewVar();
  e->Push([&] { io_thread = std::this_thread::get_id(); }, {}, {batch}, io);
  e->WaitForVar(batch);  // would hang if I/O shared the busy compute worker
  gate.Open();
  e->WaitAll();
  EXPECT_NE(io_thread, compute_thread);
  EXPECT_NE(io_thread, std::this_thread::get_id());
}

TEST(ThreadedEngine, AnotherDeviceHasItsOwnWorker) {
  auto e = MakeEngine("threaded", {1, 1});
  std::thread::id cpu_thread, gpu_thread;
  PushOptions gpu;
  gpu.device = {DeviceType::kCUDA, 0};
  e->Push([&] { cpu_thread = std::this_thread::get_id(); }, {}, {e->NewVar()}, {});
  e->Push([&] { gpu_thread = std::this_thread::get_id(); }, {}, {e->NewVar()}, gpu);
  e->WaitAll();
  EXPECT_NE(cpu_thread, gpu_thread);
}

TEST(ThreadedEngine, WorkersAndKernelThreadsShareTheCores) {
  const int cores = cpu::NumCores();
  auto e = MakeEngine("threaded", {2, 0});
  EXPECT_EQ(e->KernelThreads(Device{}), std::max(1, cores / 2));
  EXPECT_NE(e->Describe().find("2 workers"), std::string::npos) << e->Describe();
  auto dflt = MakeEngine("threaded");
  const int workers = std::min(2, cores);
  EXPECT_EQ(dflt->KernelThreads(Device{}), cores / workers);
  EXPECT_NE(dflt->Describe().find(Fmt("cpu: ", workers, workers == 1 ? " worker x " : " workers x ", cores / workers)),
            std::string::npos)
      << dflt->Describe();
  auto set = MakeEngine("threaded", {1, 3});
  int seen = 0, omp = 0;
  set->Push(
      [&] {
        seen = cpu::KernelThreads();
#ifdef _OPENMP
        omp = omp_get_max_threads();
#else
        omp = 3;
#endif
      },
      {}, {set->NewVar()}, {});
  set->WaitAll();
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(omp, 3) << "a worker's OpenMP default team follows its kernel threads";
}

// As on the naive engine, nothing pushed before the wait that reports an
// error runs after the failure: here C waits on a slow P while F fails.
TEST(ThreadedEngine, FunctionsPushedBeforeTheReportingWaitAreSkipped) {
  auto e = MakeEngine("threaded", {2, 1});
  Var p = e->NewVar(), a = e->NewVar();
  Gate gate;
  std::atomic<bool> c_ran{false}, d_ran{false};
  e->Push([&] { gate.Wait(); }, {}, {p}, {});
  PushOptions f;
  f.name = "F";
  e->Push([] { throw Error("failed"); }, {}, {a}, f);
  e->Push([&] { c_ran = true; }, {p}, {}, {});
  EXPECT_THROW(e->WaitForVar(a), Error);
  gate.Open();
  e->WaitAll();
  EXPECT_FALSE(c_ran) << "C was pushed before the wait that reported F's error";
  e->Push([&] { d_ran = true; }, {p}, {}, {});
  e->WaitAll();
  EXPECT_TRUE(d_ran) << "functions pushed after the wait run";
}

TEST(ThreadedEngine, DestroyedWithWorkInFlight) {
  std::atomic<int> ran{0};
  {
    auto e = MakeEngine("threaded", {2, 1});
    Var v = e->NewVar();
    for (int i = 0; i < 100; ++i) e->Push([&] { ++ran; }, {v}, {}, {});
  }
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace frugal
