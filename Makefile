# The two quick-start commands: `make demo` and `make test`.
# Both install missing Debian packages (as root) or print the apt-get line.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build demo train-demo test test-asan sweep bench bench-host bench-convert install clean fuzz fuzz-smoke fuzz-build fuzz-deps sass-audit sass-tools gemm-model moe-traffic compile-time

all: build

deps:
	@sh .ci/deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the bundled default: the plan of te_delayed_hybrid x
# Llama-3-8B, its kernels (quantize and GEMM) built into $(BUILD)/demo, and
# one layer of that build run on the cpu backend.
DEMO_RECIPE ?= recipes/te_delayed_hybrid.lua
DEMO_MODEL ?= recipes/models/llama-3-8b.json
demo: build
	./$(BUILD)/precc check $(DEMO_RECIPE) --model $(DEMO_MODEL)
	./$(BUILD)/precc build $(DEMO_RECIPE) --model $(DEMO_MODEL) --target sm_90a,sm_89 -o $(BUILD)/demo
	./$(BUILD)/precc-run $(BUILD)/demo --backend cpu --layer model.layers.0.self_attn.q_proj --m 128

# precc-train (examples/train) on the cpu backend: the MLP under four
# recipes, fp16 without loss scaling, and fp32; writes $(BUILD)/train/loss.svg.
TRAIN_STEPS ?= 200
train-demo: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target precc precc-train
	./$(BUILD)/examples/train/precc-train --backend cpu --steps $(TRAIN_STEPS) --out $(BUILD)/train \
	  --recipe bf16 --recipe current_tensorwise --recipe deepseek_v3 \
	  --recipe fp16_dynamic_loss_scale --recipe fp16_no_loss_scale

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DPRECC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# libFuzzer harnesses (tests/fuzz, docs/testing.md): built with clang and
# ASan + UBSan in $(FUZZ_BUILD), seeded from the project's own outputs, each
# run for FUZZ_TIME seconds; fails on any finding. fuzz-smoke is CI's short run.
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang-19
FUZZ_TIME ?= 60
FUZZ_SMOKE_TIME ?= 30
FUZZ_RUNS ?=

# clang alone is not enough: libFuzzer and the sanitizers' runtimes are in
# libclang-rt-19-dev, which a machine with clang-19 may lack (a fresh one
# did: "cannot find libclang_rt.asan_static.a"), so the probe links a fuzzer
fuzz-deps:
	@mkdir -p $(BUILD) && printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >$(BUILD)/fuzz-probe.c
	@$(FUZZ_CC) -fsanitize=fuzzer,address,undefined $(BUILD)/fuzz-probe.c -o $(BUILD)/fuzz-probe \
	  >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "precc: installing clang-19 and its runtimes (libclang-rt-19-dev) for the fuzzers"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      clang-19 libclang-rt-19-dev; \
	  else \
	    echo "precc: make fuzz needs clang-19 with libFuzzer. Run as root:" >&2; \
	    echo "  apt-get update && apt-get install -y --no-install-recommends clang-19 libclang-rt-19-dev" >&2; \
	    exit 1; \
	  fi; }

fuzz-build: build fuzz-deps
	CC=$(FUZZ_CC) cmake -S . -B $(FUZZ_BUILD) -DPRECC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	sh tests/fuzz/seeds.sh $(CURDIR) $(CURDIR)/$(BUILD) $(CURDIR)/$(FUZZ_BUILD)

fuzz: fuzz-build
	FUZZ_RUNS=$(FUZZ_RUNS) sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TIME)

fuzz-smoke: fuzz-build
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_TIME)

# Every one of the 2^32 fp32 bit patterns against the CUDA headers, and
# through every fast RNE path of every ISA copy against the generic encoder.
sweep: build
	./$(BUILD)/tests/numerics/cuda_ref_sweep --full
	for isa in baseline avx2 avx512; do \
		PRECC_INTERP_ISA=$$isa ./$(BUILD)/tests/numerics/test_numerics --full $$(nproc) || exit 1; \
	done

bench: build
	./$(BUILD)/bench/bench_convert
	./$(BUILD)/bench/bench_gemm

# Host time per layer (precc_rt, fake driver) and per precc.torch.Linear call.
bench-host: build
	sh bench/host_overhead.sh $(BUILD)

# precc.torch.convert of a 4-layer toy Llama (29 linears): a process on
# empty caches (its first convert compiles every kernel), then a warm one.
bench-convert: build
	sh tests/python/venv.sh python3 $(BUILD)/python-venv
	d=$$(mktemp -d) && for run in cold warm; do \
	  PRECC_LIB=$(BUILD) PRECC_BIN=$(BUILD)/precc PYTHONPATH=python PRECC_TORCH_CACHE=$$d/a \
	  PRECC_CACHE_DIR=$$d/k $(BUILD)/python-venv/bin/python bench/bench_convert_torch.py --runs 2 \
	  || { rm -rf $$d; exit 1; }; done; rm -rf $$d

# The SASS audit (issue 28, bench/sass_audit.py): every GEMM kernel of every
# recipe x Llama-3-8B, the 70B config and Mixtral-8x7B at sm_90a; fails on
# local memory, a spill, or a GEMM not on wgmma (SASS_AUDIT_FLAGS=--allow-known
# forgives the known failures it lists). nvdisasm and cuobjdump come from the
# CUDA toolkit, else `make sass-tools` (pip, into $(BUILD)/sass-venv).
SASS_AUDIT_FLAGS ?=
sass-audit: build
	python3 bench/sass_audit.py --precc $(BUILD)/precc --group --json $(BUILD)/sass_audit.json $(SASS_AUDIT_FLAGS)

sass-tools:
	python3 -m venv $(BUILD)/sass-venv
	$(BUILD)/sass-venv/bin/pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump

# The GEMM cost model (bench/gemm_model.py): its fit to the H200 table and
# its predictions at bench/gemm/shapes.lua for the kernels this tree builds.
gemm-model: build
	python3 bench/gemm_model.py --precc $(BUILD)/precc

# Issue 28 §6: where a cold build of every recipe x the 70B plan for
# sm_90a + sm_89 spends its time (phases, kernel families, the schedule on
# the cores, kernels alike but for constants); CPU seconds, not a test.
compile-time: build
	python3 bench/compile_time.py --precc $(BUILD)/precc

# Issue 29: the expert groups' traffic, grouped against per expert, for every
# recipe that groups x DeepSeek-V3's and Mixtral-8x7B's experts (static,
# precc build --stats; bench/RESULTS.md).
moe-traffic: build
	sh bench/moe_traffic.sh $(BUILD)/precc

# Libraries, headers, precc, precc-run, the recipes and precc.pc under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
