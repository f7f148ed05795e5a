# The Makefile forwards to CMake. On a fresh machine:
#   make demo   installs what is missing, builds, prepares Fashion-MNIST,
#               trains the default model and prints its memory plan
#   make test   installs what is missing, builds, runs every test, then the
#               tests again under ThreadSanitizer (make tsan)
#   make tsan   builds the tests with -fsanitize=thread (no OpenMP) in
#               build-tsan and runs them; any race report fails it
BUILD ?= build
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
FRUGAL = $(BUILD)/frugal
DEMO_CONFIG = models/mlp/fashion_mnist.prototxt

.PHONY: all deps build test tsan demo data clean

all: build

deps:
	@bash tools/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

data: deps
	@bash data/fashion-mnist/prepare.sh

test: build data
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) tsan

# The whole suite under ThreadSanitizer: the engine, the executor, the
# trainer loop and the CLI's training runs included (about 2 minutes on 2
# cores after an 8-minute build). halt_on_error makes the first race fail the
# run; a run past TSAN_TIMEOUT seconds (a hang: the last "[ RUN ]" line names
# the test) fails it too.
TSAN_TIMEOUT ?= 900
tsan: deps data
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DFRUGAL_TSAN=ON -DFRUGAL_CUDA=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target frugal_tests
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tools/tsan.supp" \
	  timeout --kill-after=30 $(TSAN_TIMEOUT) $(TSAN_BUILD)/tests/frugal_tests

demo: build data
	$(FRUGAL) plan --config $(DEMO_CONFIG) --memory all
	$(FRUGAL) train --config $(DEMO_CONFIG)

clean:
	rm -rf $(BUILD) $(TSAN_BUILD)
