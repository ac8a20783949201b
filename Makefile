# Thin wrapper over CMake: installs missing Debian packages, configures build/, builds.
#   make demo   build and run scenarios/quickstart.yaml (results in out/quickstart)
#   make test   build and run the whole test suite (CTest + libcheck)
#   make bench  build and run the benchmarks in bench/
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# PGO=1: profile-guided optimisation (CMakeLists.txt, scripts/pgo-train.sh): an instrumented
# kvfleet in $(BUILD)/pgo-gen replays bundled scenarios (again only when it or the script
# changed) and $(BUILD) is compiled with its profiles (a file is compiled with the profiles
# of the latest training when it is compiled at all). PGO=0: one plain build.
PGO ?= 1
ifneq ($(PGO),0)
ifneq ($(PGO),1)
$(error PGO must be 0 or 1, not '$(PGO)')
endif
endif
PGO_DIR = $(abspath $(BUILD))/pgo-data
ifeq ($(PGO),1)
PGO_CONF = -DKVFLEET_PGO=use -DKVFLEET_PGO_DIR=$(PGO_DIR)
else
PGO_CONF = -DKVFLEET_PGO=
endif

.PHONY: all setup build demo test bench clean gpu-check

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) $(PGO_CONF) $(CMAKE_FLAGS) >/dev/null

build: setup $(BUILD)/CMakeCache.txt
ifeq ($(PGO),1)
	cmake -S . -B $(BUILD)/pgo-gen -DKVFLEET_PGO=generate -DKVFLEET_PGO_DIR=$(PGO_DIR) \
	    -DKVFLEET_CUDA=OFF -DKVFLEET_MPI=OFF $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD)/pgo-gen -j $(JOBS) --target kvfleet
	@if [ ! $(PGO_DIR)/.trained -nt $(BUILD)/pgo-gen/kvfleet ] || \
	    [ ! $(PGO_DIR)/.trained -nt scripts/pgo-train.sh ]; then \
	    scripts/pgo-train.sh $(BUILD)/pgo-gen/kvfleet $(PGO_DIR) && touch $(PGO_DIR)/.trained; \
	fi
endif
	cmake -S . -B $(BUILD) $(PGO_CONF) >/dev/null
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
