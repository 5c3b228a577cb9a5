# Thin wrapper over CMake. `make demo` and `make test` do all set-up on a fresh Debian machine.
BUILD    ?= build
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian packages: build, tests, samples (one list, kept here).
DEPS := build-essential cmake pkg-config liblua5.4-dev lua5.4 lua-unit ocl-icd-opencl-dev \
        opencl-headers pocl-opencl-icd clinfo libopenblas-dev zlib1g-dev libpcre2-dev libedit-dev \
        libjansson-dev libxxhash-dev dataset-fashion-mnist luarocks libopenmpi-dev openmpi-bin clang libomp-dev libdnnl-dev

.PHONY: all deps build test test-long sanitize fuzz demo install format lint bench clean

all: build

deps:
	@missing=$$(for p in $(DEPS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Every test except those labelled `long` (runs of many minutes, such as training the eight SSL
# methods to their probe targets): `make test-long` runs those.
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -LE long

test-long: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L long

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, less the tests labelled
# `slow` (soak runs, tutorials, samples trained to a target) and the rockspec test (a plain
# Release build through LuaRocks): the main pass runs those.
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNETCL_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j$(JOBS) -E package.rockspec -LE "slow|long"
	JOBS=$(JOBS) sh tests/fuzz/run.sh

# The libFuzzer targets of tests/fuzz/ (clang, in build-fuzz): each replays its corpus, then
# mutates it for an equal share of FUZZ_SECONDS (60 in all); `make sanitize` ends with it.
fuzz: deps
	JOBS=$(JOBS) sh tests/fuzz/run.sh

# Trains the Fashion-MNIST sample on the default device (docs/training.md); the checkpoint and
# its chart go to $(BUILD)/demo. DEMO_ARGS adds options: make demo DEMO_ARGS="--epochs 5".
# No thread variables are needed: libnetcl runs its loops and GEMMs on one pool of its own
# (docs/performance.md).
demo: build
	mkdir -p $(BUILD)/demo
	$(BUILD)/bin/netcl-lua samples/fashion_mnist.lua --checkpoint $(BUILD)/demo/fashion_mnist.netcl $(DEMO_ARGS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --inline-suppr \
	  --suppress=missingIncludeSystem -I runtime/include -I runtime -I bindings runtime bindings

# Benchmarks want an optimized build of their own: `make bench` or `make bench BENCH=gemm`.
bench: deps
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build build-release -j$(JOBS)
	build-release/bin/netcl-lua tests/bench/run.lua $(BENCH)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
