# The two quick-start commands: `make demo` and `make test`.
# Both install missing Debian packages (as root) or print the apt-get line.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-asan sweep bench install clean

all: build

deps:
	@sh .ci/deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/precc check recipes/te_delayed_hybrid.lua --model recipes/models/llama-3-8b.json

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DPRECC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# Every one of the 2^32 fp32 bit patterns against the CUDA headers.
sweep: build
	./$(BUILD)/tests/numerics/cuda_ref_sweep --full

bench: build
	./$(BUILD)/bench/bench_convert
	./$(BUILD)/bench/bench_gemm

# Libraries, headers, precc, precc-run, the recipes and precc.pc under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
