# The Makefile forwards to CMake. On a fresh machine:
#   make demo   installs what is missing, builds, prepares Fashion-MNIST,
#               trains the default model and prints its memory plan
#   make test   installs what is missing, checks the C++ layout (make
#               format-check), builds, runs every test, then the
#               tests again under ThreadSanitizer (make tsan) and under
#               AddressSanitizer with UBSan (make asan), then make fuzz
#   MPI=ON      (CI: .ci/run) requires MPI, so the tests under mpirun
#               (tests/distributed/mpi_test.cc) cannot drop out; the default AUTO
#               builds with MPI when CMake finds it, OFF without
#   make tsan   builds the tests with -fsanitize=thread (no OpenMP) in
#               build-tsan and runs them; any race report fails it
#   make asan   the same with AddressSanitizer and UBSan in build-asan
#               (part of make test)
#   make fuzz   builds the libFuzzer targets (tests/fuzz) with clang in
#               build-fuzz and runs each FUZZ_SECONDS (part of make test)
BUILD ?= build
TSAN_BUILD ?= build-tsan
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
FRUGAL = $(BUILD)/frugal
DEMO_CONFIG = models/mlp/fashion_mnist.prototxt
MPI ?= AUTO

.PHONY: all deps build test tsan asan fuzz demo data clean format-check

all: build

deps:
	@bash tools/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DFRUGAL_MPI=$(MPI)

# An existing build folder is reconfigured when MPI is not the default.
build: deps $(BUILD)/CMakeCache.txt
	@if [ "$(MPI)" != AUTO ]; then cmake -S . -B $(BUILD) -DFRUGAL_MPI=$(MPI); fi
	cmake --build $(BUILD) -j $(JOBS)

data: deps
	@bash data/fashion-mnist/prepare.sh

# Every C++/CUDA file as clang-format-14 lays it out (.clang-format);
# tools/check_format.sh --fix formats them.
format-check: deps
	@bash tools/check_format.sh

test: format-check build data
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@bash tools/skipped_tests.sh $(BUILD)
	$(MAKE) tsan
	$(MAKE) asan
	$(MAKE) fuzz

# The whole suite under ThreadSanitizer: the engine, the executor, the
# trainer loop and the CLI's training runs included, as JOBS shards at once
# (tools/run_shards.sh), after a 2-minute unity build. halt_on_error makes
# the first race fail the run; a shard past SANITIZER_TIMEOUT seconds (a
# hang: the last "[ RUN ]" line names the test) fails it too.
SANITIZER_TIMEOUT ?= 900
# Left out under ThreadSanitizer, run in ctest and under make asan: tests
# that run one thread (the planner's searches, the importers' random
# damage, the cache-age check of the schedule, byte by byte), in which it
# has no race to find; the char LSTM's 2 strategies through the training
# loop, which the other StrategyTrain tests run under it (its lstm op runs
# under it in OpsLstm.*); and the CLI's runs under a memory limit, whose
# check of the peak a sanitizer's process skips (its resident set is not
# the process's own) and whose training the other TrainCli tests run under
# it. Of TSan's test seconds (2026-12-07, 2 shards): the memory limit's
# 119-168, the char LSTM's 45, the other three 33; the planner's took 476
# of 763 (2026-12-05).
TSAN_SKIP = OptimumGap.* CostTable.BudgetPlansMinimiseTimeWhereFlopsDisagree \
  TrainCli.PlanFitFindsTheLargestBatchOfEachStrategy Recompute.InfeasibleBudgetNamesTheSmallestFeasible \
  Recompute.SearchesBuildFewGraphsAtAnyLength PlanMemory.ModelConfigsPlaceWithin2PercentOfTheLowerBound \
  PlanMonotone.* MxnetImport.RandomDamageIsAnErrorNeverACrash OnnxImport.RandomDamageIsAnErrorNeverACrash \
  Schedule.ColdBytesAreTheBytesTouchedLongestAgo StrategyTrain.CharLstmEndsWithTheBitsOfNone \
  TrainCli.MemoryLimitBoundsTheProcess
space := $(subst ,, )
tsan: deps data
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DFRUGAL_TSAN=ON -DFRUGAL_CUDA=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target frugal_tests
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tools/tsan.supp" \
	  bash tools/run_shards.sh $(TSAN_BUILD)/tests/frugal_tests $(JOBS) $(SANITIZER_TIMEOUT) \
	  --gtest_filter=-$(subst $(space),:,$(strip $(TSAN_SKIP)))

# The suite but for ASAN_SKIP under AddressSanitizer and UndefinedBehaviorSanitizer,
# as JOBS shards at once, after a 5- to 8-minute unity build (17 minutes with
# one file per unit and -g). Any report fails the run, a leak included
# (LeakSanitizer), in the tests and in every process they start; what Open
# MPI's ranks keep until exit is suppressed by its libraries
# (tools/lsan.supp: the ranks record whole stacks, tests/distributed/mpi_test.cc).
# The planner's sweeps, which run its searches over and over (20 budgets
# of every models/ config and of 66 random graphs; the gap suite against
# its references), run in ctest, not again here: they took 842 of the
# 1,240 test seconds under ASan (2 cores), and the planner's code runs
# under ASan in its other tests (Recompute.*, PlanMemory.*, the rest of
# OptimumGap.*). Left out too: the check of its predicted costs on every
# case of the suite (16 s of the 351 test seconds left) and, as under make
# tsan, the char LSTM through the training loop (36 s; its lstm op runs
# under ASan in OpsLstm.*, the loop in the other StrategyTrain tests).
ASAN_SKIP = PlanMonotone.* OptimumGap.PlannerIsWithinItsDocumentedGapOfTheOptimum \
  OptimumGap.ProgramFindsTheSearchsOptimum OptimumGap.PredictedRecomputeCostIsTheBuiltOne \
  StrategyTrain.CharLstmEndsWithTheBitsOfNone
asan: deps data
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DFRUGAL_ASAN=ON -DFRUGAL_CUDA=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target frugal_tests
	ASAN_OPTIONS="detect_leaks=1" LSAN_OPTIONS="suppressions=$(CURDIR)/tools/lsan.supp" \
	  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
	  bash tools/run_shards.sh $(ASAN_BUILD)/tests/frugal_tests $(JOBS) $(SANITIZER_TIMEOUT) \
	  --gtest_filter=-$(subst $(space),:,$(strip $(ASAN_SKIP)))

# A short smoke run of every libFuzzer target (the binary readers and the
# config language; tests/fuzz/README.md), seeded with the model configs;
# any crash, sanitizer report or non-frugal exception fails it. Longer runs:
# FUZZ_SECONDS=600 make fuzz.
FUZZ_SECONDS ?= 10
FUZZ_TARGETS = fuzz_idx fuzz_cifar fuzz_recordio fuzz_expr fuzz_config
fuzz: deps
	CXX=clang++ CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=OFF \
	  -DFRUGAL_FUZZ=ON -DFRUGAL_CUDA=OFF -DFRUGAL_MPI=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  corpus=$$(mktemp -d); \
	  if [ $$t = fuzz_config ]; then for f in models/*/*.prototxt; do cp $$f $$corpus/$$(echo $$f | tr / _); done; fi; \
	  status=0; \
	  $(FUZZ_BUILD)/tests/fuzz/$$t $$corpus -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=16384 \
	    > $$corpus.log 2>&1 || status=$$?; \
	  echo "fuzz: $$t, $(FUZZ_SECONDS) s: $$(grep -o 'Done [0-9]* runs' $$corpus.log || echo 'no runs')"; \
	  if [ $$status -ne 0 ]; then tail -40 $$corpus.log; echo "fuzz: $$t failed (exit $$status)"; fi; \
	  rm -rf $$corpus $$corpus.log; \
	  [ $$status -eq 0 ]; \
	done

demo: build data
	$(FRUGAL) plan --config $(DEMO_CONFIG) --memory all
	$(FRUGAL) train --config $(DEMO_CONFIG)

clean:
	rm -rf $(BUILD) $(TSAN_BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
