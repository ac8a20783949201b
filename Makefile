# Thin wrapper over CMake: installs missing Debian packages, configures build/, builds.
#   make demo   build and run scenarios/quickstart.yaml (results in out/quickstart)
#   make test   build and run the whole test suite (CTest + libcheck)
#   make bench  build and run the benchmarks in bench/
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build demo test bench clean gpu-check

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/kvfleet run scenarios/quickstart.yaml -o out/quickstart --force

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	bench/run.sh $(BUILD)

gpu-check:
	bench/gpu_check.sh

clean:
	rm -rf $(BUILD) out
