# The Makefile forwards to CMake. On a fresh machine:
#   make demo   installs what is missing, builds, prepares Fashion-MNIST,
#               trains the default model and prints its memory plan
#   make test   installs what is missing, builds, runs every test
BUILD ?= build
JOBS ?= $(shell nproc)
FRUGAL = $(BUILD)/frugal
DEMO_CONFIG = models/mlp/fashion_mnist.prototxt

.PHONY: all deps build test demo data clean

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

demo: build data
	$(FRUGAL) plan --config $(DEMO_CONFIG) --memory all
	$(FRUGAL) train --config $(DEMO_CONFIG)

clean:
	rm -rf $(BUILD)
