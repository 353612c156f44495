# pmpd -- GNU make build.  `make help` lists the targets.
#
# Honoured: CC AR CFLAGS LDFLAGS CROSS_COMPILE PREFIX DESTDIR, plus
#   BUILD       object tree (default build/, build/<triple> when cross-compiling)
#   ARCH_FLAGS  target selection (default -march=native on the host, none when cross)
#   RUN         prefix for running test binaries (e.g. "qemu-aarch64 -cpu max")
#   SAN=1       build with AddressSanitizer + UndefinedBehaviorSanitizer

.DEFAULT_GOAL := all
SHELL := /bin/sh

ifneq ($(CROSS_COMPILE),)
  ifeq ($(origin CC),default)
    CC := $(CROSS_COMPILE)gcc
  endif
  ifeq ($(origin AR),default)
    AR := $(CROSS_COMPILE)ar
  endif
  NM ?= $(CROSS_COMPILE)nm
  SIZE_TOOL ?= $(CROSS_COMPILE)size
  TRIPLE := $(shell $(CC) -dumpmachine 2>/dev/null)
  BUILD ?= build/$(TRIPLE)
  ARCH_FLAGS ?=
else
  NM ?= nm
  SIZE_TOOL ?= size
  BUILD ?= build
  ARCH_FLAGS ?= -march=native
endif

PREFIX ?= /usr/local
DESTDIR ?=
CFLAGS ?= -O2 -g
LDFLAGS ?=
RUN ?=
TEST_TIMEOUT ?= 900

WARN := -std=c99 -pedantic -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
ifeq ($(SAN),1)
  SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
  SAN_FLAGS :=
endif
ALL_CFLAGS := $(WARN) $(ARCH_FLAGS) $(CFLAGS) $(SAN_FLAGS) -I. -MMD -MP
OFFLINE_CFLAGS := $(ALL_CFLAGS) -DPMPD_OFFLINE=1
LIBS := -lm -pthread

# Sources: everything under pmpd_impl/ and platform/ is the runtime, except
# pmpd_impl/offline/ (heap-using tools: importers, quantizers, calibration).
RUNTIME_SRC := $(sort $(shell find pmpd_impl platform -name '*.c' -not -path 'pmpd_impl/offline/*'))
OFFLINE_SRC := $(sort $(shell find pmpd_impl/offline -name '*.c' 2>/dev/null))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_SUPPORT_SRC := $(sort $(wildcard tests/support/*.c))
EXAMPLE_SRC := $(sort $(wildcard examples/pmpd-*.c))
EXAMPLE_COMMON_SRC := $(sort $(wildcard examples/common/*.c))

RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/obj/%.o)
OFFLINE_OBJ := $(OFFLINE_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SUPPORT_OBJ := $(TEST_SUPPORT_SRC:%.c=$(BUILD)/obj/%.o)
EXAMPLE_COMMON_OBJ := $(EXAMPLE_COMMON_SRC:%.c=$(BUILD)/obj/%.o)
# Which tests a run executes (TEST_SET; make check picks per target, so the
# emulated targets spend their time where they add coverage):
#   all      every test;
#   runtime  all but OFFLINE_TESTS (arm64 -cpu max): the offline tools are
#            host-independent C that the native, sanitizer and 32-bit Arm
#            runs cover;
#   kernels  KERNEL_TESTS only: the arm64 CPU without the dot product
#            (cortex-a53) differs from -cpu max only in the kernels the
#            build selects;
#   scalar   all but KERNEL_TESTS: 32-bit Arm is built without NEON, where
#            the kernel a KERNEL_TEST checks is the scalar oracle itself.
# OFFLINE_TESTS: tests whose subject is the offline (heap-using) tooling:
# importers, converters, calibration, bit allocation, evaluation.
OFFLINE_TESTS := bad_input_import calibrate_container convert_stream eval gguf_types import knapsack ldlq mkgguf \
  palette parallel pq_calibrate_file schedule_solver
# KERNEL_TESTS: tests whose subject is a compiled SIMD kernel (weights,
# attention, Hadamard, element-wise ops, f16 conversion, W8A8's shadow
# path) against its scalar oracle or a brute force.
KERNEL_TESTS := anyprec exact_attention forward_f16 forward_linear hadamard kernels_qmatmul kv_uniform nuq ops \
  pq_attention pq_kernels rotated_signs tcq vq w8a8 w8a8_outliers
TEST_SET ?= all
TEST_NAMES := $(TEST_SRC:tests/test_%.c=%)
TEST_NAMES_all := $(TEST_NAMES)
TEST_NAMES_runtime := $(filter-out $(OFFLINE_TESTS),$(TEST_NAMES))
TEST_NAMES_kernels := $(filter $(KERNEL_TESTS),$(TEST_NAMES))
TEST_NAMES_scalar := $(filter-out $(KERNEL_TESTS),$(TEST_NAMES))
ifeq ($(TEST_NAMES_$(TEST_SET)),)
  $(error TEST_SET must be all, runtime, kernels or scalar)
endif
# The slowest tests (under emulation, slowest first) start first, so the
# JOBS parallel runs do not end waiting on one long test.
SLOW_TESTS := matrix palette quant_model gguf_types w8a8_outliers schedule_solver convert_stream pq_attention \
  nuq hadamard
TEST_ORDER := $(foreach t,$(SLOW_TESTS),$(filter $(t),$(TEST_NAMES_$(TEST_SET)))) \
  $(filter-out $(SLOW_TESTS),$(TEST_NAMES_$(TEST_SET)))
TEST_BIN := $(TEST_ORDER:%=$(BUILD)/tests/test_%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/%)

LIB := $(BUILD)/libpmpd.a
OFFLINE_LIB := $(BUILD)/libpmpd_offline.a

.PHONY: all lib examples tests test check amalgamation amalgamation-test heap-check \
        check-native check-cli check-asan check-isas check-oracles check-aarch64 check-arm32 deps size install bench bench-compare mca demo firmware-example \
        fuzz fuzz-replay \
        clean help

all: lib examples

lib: $(LIB) $(OFFLINE_LIB)

examples: $(EXAMPLE_BIN)

$(LIB): $(RUNTIME_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(OFFLINE_LIB): $(OFFLINE_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# Offline library, test support and example helpers see the offline API.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(OFFLINE_CFLAGS) -c -o $@ $<

# Runtime objects are compiled without PMPD_OFFLINE.
$(RUNTIME_OBJ): $(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(TEST_SUPPORT_OBJ) $(OFFLINE_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(OFFLINE_CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_PORT) $(TEST_SUPPORT_OBJ) $(OFFLINE_LIB) $(LIB) -lcmocka $(LIBS)

# test_model_read_fallback links a POSIX port built with PMPD_USE_MMAP=0
# ahead of the library (whose own port object is then never pulled in), so
# pmpd_model_open_file takes its read-into-the-arena path.
NO_MMAP_PORT := $(BUILD)/obj/no-mmap/platform/posix.o
$(NO_MMAP_PORT): platform/posix.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DPMPD_USE_MMAP=0 -c -o $@ $<
$(BUILD)/tests/test_model_read_fallback: $(NO_MMAP_PORT)
$(BUILD)/tests/test_model_read_fallback: TEST_PORT := $(NO_MMAP_PORT)

# test_w8a8_delegate links a W8A8 format object built with
# -DPMPD_W8A8_DELEGATE=test_w8a8_delegate ahead of the library, so every
# W8A8 product goes through the test's delegate (w8a8.h says how a board's
# NPU driver fills that slot).
DELEGATE_OBJ := $(BUILD)/obj/delegate/pmpd_impl/weights/w8a8/w8a8_format.o
$(DELEGATE_OBJ): pmpd_impl/weights/w8a8/w8a8_format.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DPMPD_W8A8_DELEGATE=test_w8a8_delegate -c -o $@ $<
$(BUILD)/tests/test_w8a8_delegate: $(DELEGATE_OBJ)
$(BUILD)/tests/test_w8a8_delegate: TEST_PORT := $(DELEGATE_OBJ)

# Shared example code as an archive, so each tool links only what it uses.
EXAMPLE_COMMON_LIB := $(BUILD)/libpmpd_examples.a
$(EXAMPLE_COMMON_LIB): $(EXAMPLE_COMMON_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/pmpd-%: examples/pmpd-%.c $(EXAMPLE_COMMON_LIB) $(OFFLINE_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(OFFLINE_CFLAGS) $(LDFLAGS) -o $@ $< $(EXAMPLE_COMMON_LIB) $(OFFLINE_LIB) $(LIB) $(LIBS)

# Keep shared objects that only pattern rules mention (make would delete them
# as intermediates and rebuild them on every run).
.SECONDARY: $(TEST_SUPPORT_OBJ)

tests: $(TEST_BIN)

# Runs every cmocka test binary (from the repository root, so tests find
# ../shared); stops at the first failing one.  TEST_REDUCED=1 (set for the
# sanitizer and emulated runs) tells the tests that size themselves by it
# (test_matrix) to run their smaller variant; PMPD_TEST_EMULATED (set where
# RUN names an emulator) lets them leave out host-independent heavy work.
TEST_REDUCED ?=
# Test binaries run JOBS at a time (each into its own log, printed whole when
# it ends, so outputs do not interleave); the first failure stops the rest.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: tests
	@printf '%s\n' $(TEST_BIN) | xargs -P $(JOBS) -I{} sh -c \
	  'if PMPD_TEST_REDUCED=$(TEST_REDUCED) PMPD_TEST_EMULATED=$(if $(RUN),1,) timeout $(TEST_TIMEOUT) $(RUN) {} > {}.log 2>&1; \
	   then echo "== $(RUN) {}"; cat {}.log; \
	   else echo "== $(RUN) {}: FAILED"; cat {}.log; exit 255; fi'

# ---- the README's test command -------------------------------------------
# Each step builds with JOBS parallel jobs (the steps themselves run in order).
check: deps
	$(MAKE) -j$(JOBS) check-native
	$(MAKE) -j$(JOBS) check-asan
	$(MAKE) amalgamation-test
	$(MAKE) check-isas
	$(MAKE) -j$(JOBS) firmware-example
	$(MAKE) heap-check
	$(MAKE) -j$(JOBS) fuzz-replay
	$(MAKE) -j$(JOBS) check-aarch64
	$(MAKE) -j$(JOBS) check-arm32
	$(MAKE) check-oracles
	@echo "make check: all passed"

# Where the compiler targets AVX-512, its GEMV replaces the AVX2 one for
# single tokens (and for the attention rows, NUQ, VQ, TCQ and nested weights); the
# kernel and quantized-model tests then run once more
# from a tree built without it, so the AVX2 GEMV stays tested too.
check-native:
	$(MAKE) test
	$(MAKE) check-cli
	@if echo | $(CC) $(ARCH_FLAGS) -dM -E - | grep -q __AVX512VBMI__; then \
	  $(MAKE) BUILD=$(BUILD)/no-avx512 CFLAGS="$(CFLAGS) -DPMPD_USE_AVX512=0" \
	    TEST_BIN="$(BUILD)/no-avx512/tests/test_ops $(BUILD)/no-avx512/tests/test_kernels_qmatmul $(BUILD)/no-avx512/tests/test_quant_model $(BUILD)/no-avx512/tests/test_pq_kernels $(BUILD)/no-avx512/tests/test_nuq $(BUILD)/no-avx512/tests/test_vq $(BUILD)/no-avx512/tests/test_anyprec $(BUILD)/no-avx512/tests/test_tcq" test; \
	fi

# pmpd-run as a process: --tokenize against llama2.c's ids, --info, a
# scripted --chat (tests/cli/check-run.sh).
check-cli: $(BUILD)/pmpd-run $(BUILD)/pmpd-convert $(BUILD)/pmpd-mkgguf
	BUILD=$(BUILD) MODELS=$(MODELS) sh tests/cli/check-run.sh

# -g1: line tables for the sanitizers' reports, without the variable
# descriptions (a third less compile time on a sample of four files).
check-asan:
	$(MAKE) BUILD=build/asan SAN=1 CFLAGS="-O1 -g1" TEST_REDUCED=1 test

# Every source through clang's front end (-fsyntax-only: the warnings
# without code generation, about 15 s a target) for the instruction sets
# that select other kernels at compile time and that no build above
# covers: AVX2 alone, AVX2 with AVX-VNNI, AVX-512 without and with VBMI,
# and Armv8.0 / dotprod / i8mm.  A helper left unused under one of them
# (the AVX2 q2cb decode under AVX-VNNI) broke -Werror builds unnoticed.
ISA_TARGETS := -march=haswell -march=alderlake -march=skylake-avx512 -march=icelake-server \
  --target=aarch64-linux-gnu,-march=armv8-a --target=aarch64-linux-gnu,-march=armv8.2-a+dotprod \
  --target=aarch64-linux-gnu,-march=armv8.6-a+dotprod+i8mm
check-isas:
	@for t in $(ISA_TARGETS); do \
	  flags=$$(echo $$t | tr ',' ' '); echo "== clang -fsyntax-only $$flags"; \
	  printf '%s\n' $(RUNTIME_SRC) $(OFFLINE_SRC) | xargs -P $(JOBS) -n 16 \
	    clang $(WARN) -I. -DPMPD_OFFLINE=1 $$flags -fsyntax-only || exit 1; \
	done

# The arm64 binaries run with Debian's multiarch arm64 libc and cmocka
# (libcmocka-dev:arm64), whose loader qemu finds at /lib/ld-linux-aarch64.so.1.
AARCH64 := aarch64-linux-gnu-
check-aarch64:
	$(MAKE) CROSS_COMPILE=$(AARCH64) BUILD=build/aarch64-max TEST_SET=runtime \
	  ARCH_FLAGS="-march=armv8.6-a+dotprod+i8mm" RUN="qemu-aarch64 -cpu max" TEST_REDUCED=1 test
	$(MAKE) CROSS_COMPILE=$(AARCH64) BUILD=build/aarch64-v8 TEST_SET=kernels \
	  ARCH_FLAGS="-march=armv8-a" RUN="qemu-aarch64 -cpu cortex-a53" TEST_REDUCED=1 test

# 32-bit Arm (size_t is 32 bits there): the suite but its kernel tests under
# qemu-arm, built without NEON so only the scalar paths run; this is where
# the checked size arithmetic meets its limits.
check-arm32:
	$(MAKE) CROSS_COMPILE=arm-linux-gnueabihf- BUILD=build/armhf TEST_SET=scalar \
	  ARCH_FLAGS="-march=armv7-a -mfpu=vfpv3-d16" RUN="qemu-arm" TEST_REDUCED=1 test

deps:
	@sh pmpd_impl/build/need-tools.sh

# Tests against other programs from npm (llama.cpp through node-llama-cpp,
# an independent tokenizer): tests/oracle/run.sh installs them, pinned, and
# runs each tests/oracle/check-*.sh; skipped with a message when npm is
# unreachable.  The tools they drive are built first.
check-oracles: all
	BUILD=$(BUILD) sh tests/oracle/run.sh

# ---- single-header amalgamation ------------------------------------------
amalgamation: build/pmpd.h

build/pmpd.h: pmpd.h $(RUNTIME_SRC) $(OFFLINE_SRC) $(shell find pmpd_impl platform -name '*.h') pmpd_impl/build/amalgamate.sh
	@mkdir -p build
	sh pmpd_impl/build/amalgamate.sh > $@.tmp && mv $@.tmp $@

AMALG_FLAGS := -std=c99 -pedantic -Wall -Wextra -Werror -Ibuild
amalgamation-test: build/pmpd.h
	@for cc in gcc clang; do \
	  echo "== amalgamated header alone with $$cc"; \
	  $$cc $(AMALG_FLAGS) -O1 -o build/amalgamation-$$cc tests/amalgamation/main.c -lm -pthread && \
	  ./build/amalgamation-$$cc || exit 1; \
	  $$cc $(AMALG_FLAGS) -DPMPD_OFFLINE=1 -O1 -o build/amalgamation-offline-$$cc tests/amalgamation/main.c -lm -pthread && \
	  ./build/amalgamation-offline-$$cc || exit 1; \
	done

# ---- the runtime must never reach for the heap ---------------------------
heap-check: $(LIB)
	@if $(NM) -u $(RUNTIME_OBJ) | grep -E '^ *U (malloc|calloc|realloc|free|aligned_alloc|posix_memalign|strdup)$$'; then \
	  echo "heap-check: runtime objects reference the heap (see above)"; exit 1; \
	else echo "heap-check: runtime objects reference no heap function"; fi

size:
	@$(MAKE) --no-print-directory $(LIB)
	@$(MAKE) --no-print-directory CROSS_COMPILE=$(AARCH64) BUILD=build/aarch64-size ARCH_FLAGS="-march=armv8.2-a+dotprod" CFLAGS="-Os" build/aarch64-size/libpmpd.a
	@echo "runtime (host, $(CFLAGS)):"; $(SIZE_TOOL) -t $(LIB) | tail -1
	@echo "runtime (aarch64, -Os):"; $(AARCH64)size -t build/aarch64-size/libpmpd.a | tail -1

# ---- fuzzing ---------------------------------------------------------------
FUZZ_SECONDS ?= 60
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_NAMES := $(FUZZ_SRC:fuzz/fuzz_%.c=%)
FUZZ_CC ?= clang
FUZZ_FLAGS := -std=c99 -Wall -Wextra -Werror -g -O1 -I. -DPMPD_OFFLINE=1 \
  -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_LIB_SRC := $(RUNTIME_SRC) $(OFFLINE_SRC)
# The library is compiled once, with coverage instrumentation, into an archive
# both kinds of driver link (each pulls in only the objects it uses).
FUZZ_OBJ := $(FUZZ_LIB_SRC:%.c=build/fuzz/obj/%.o)
FUZZ_ARCHIVE := build/fuzz/libpmpd_fuzz.a

build/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FUZZ_ARCHIVE): $(FUZZ_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

build/fuzz/replay-%: fuzz/fuzz_%.c fuzz/replay_main.c $(FUZZ_ARCHIVE)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< fuzz/replay_main.c $(FUZZ_ARCHIVE) -lm -pthread

build/fuzz/libfuzzer-%: fuzz/fuzz_%.c $(FUZZ_ARCHIVE)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_ARCHIVE) -lm -pthread

# Replays every seed and every past crasher, then fuzzes each harness
# briefly; JOBS harnesses at a time, each one's replay output printed whole.
FUZZ_SMOKE_SECONDS ?= 5
fuzz-replay: $(FUZZ_NAMES:%=build/fuzz/replay-%) $(FUZZ_NAMES:%=build/fuzz/libfuzzer-%)
	@printf '%s\n' $(FUZZ_NAMES) | xargs -P $(JOBS) -I{} sh -c 'n={}; \
	  if ./build/fuzz/replay-$$n fuzz/corpus/$$n fuzz/regressions/$$n > build/fuzz/$$n.replay.log 2>&1; \
	  then echo "== replay $$n"; cat build/fuzz/$$n.replay.log; \
	  else echo "== replay $$n: FAILED"; cat build/fuzz/$$n.replay.log; exit 255; fi; \
	  mkdir -p build/fuzz/work/$$n; \
	  ./build/fuzz/libfuzzer-$$n -max_total_time=$(FUZZ_SMOKE_SECONDS) -print_final_stats=0 \
	    $$( [ -f fuzz/$$n.dict ] && echo -dict=fuzz/$$n.dict ) -artifact_prefix=build/fuzz/ \
	    build/fuzz/work/$$n fuzz/corpus/$$n 2>build/fuzz/$$n.log || \
	  { echo "== fuzz $$n: FAILED"; tail -40 build/fuzz/$$n.log; exit 255; }'

fuzz: $(FUZZ_NAMES:%=build/fuzz/libfuzzer-%)
	@set -e; for n in $(FUZZ_NAMES); do \
	  mkdir -p build/fuzz/work/$$n fuzz/regressions/$$n; echo "== fuzz $$n for $(FUZZ_SECONDS)s"; \
	  ./build/fuzz/libfuzzer-$$n -max_total_time=$(FUZZ_SECONDS) \
	    $$( [ -f fuzz/$$n.dict ] && echo -dict=fuzz/$$n.dict ) -artifact_prefix=fuzz/regressions/$$n/ \
	    build/fuzz/work/$$n fuzz/corpus/$$n 2>&1 | tail -3; \
	done

# ---- running things --------------------------------------------------------
# The demo: convert stories260K (llama2.c checkpoint + tokenizer) once, then
# tell a story.  MODELS names the folder holding stories260K.bin and tok512.bin.
# The container is remade whenever the converter is rebuilt, so it always
# matches the format this tree reads.
MODELS ?= ../shared/models
DEMO_MODEL := $(BUILD)/stories260K.pmpd
DEMO_ARGS ?= -p "Once upon a time" -n 256
demo: $(BUILD)/pmpd-run $(DEMO_MODEL)
	$(BUILD)/pmpd-run $(DEMO_MODEL) $(DEMO_ARGS)

$(DEMO_MODEL): $(BUILD)/pmpd-convert
	@if [ ! -f "$(MODELS)/stories260K.bin" ] || [ ! -f "$(MODELS)/tok512.bin" ]; then \
	  echo "make demo: $(MODELS)/stories260K.bin and $(MODELS)/tok512.bin are needed."; \
	  echo "  Both are Karpathy's tinyllamas files (MIT), used by llama2.c:"; \
	  echo "    https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K/stories260K.bin"; \
	  echo "    https://huggingface.co/karpathy/tinyllamas/resolve/main/stories260K/tok512.bin"; \
	  echo "  Download them into a folder and run: make demo MODELS=that/folder"; \
	  exit 1; \
	fi
	$(BUILD)/pmpd-convert $(MODELS)/stories260K.bin $@ --tokenizer $(MODELS)/tok512.bin

bench: $(BUILD)/pmpd-bench
	$(BUILD)/pmpd-bench

# pmpd beside llama.cpp (npm node-llama-cpp, or LLAMA_BENCH=path/to/llama-bench)
# on a synthetic model of real shape: bench/compare.sh says what it times.
bench-compare: $(BUILD)/pmpd-mkgguf $(BUILD)/pmpd-convert $(BUILD)/pmpd-run $(BUILD)/pmpd-bench
	BUILD=$(BUILD) sh bench/compare.sh

# Static cost of the NEON GEMV loop bodies (tests/mca/neon_gemv_regions.c:
# nested 2/3/4 bits beside q8, q4, q2cb, and VQ at its five widths) from llvm-mca on an in-order
# (Cortex-A55) and an out-of-order (Cortex-A57) core, compiled by GCC and
# clang, with and without dotprod; then the x86 GEMV and attention loop
# bodies (tests/mca/x86_regions.c) on Zen3, Skylake-X and Ice Lake (whose
# AVX-512 VBMI build adds the AVX-512 GEMV).  Clang writes the region
# markers as "//" comments, which llvm-mca does not see: sed turns them
# back to "#".
MCA ?= llvm-mca-14
mca:
	@mkdir -p build/mca
	@for compiler in gcc clang; do \
	  for cpu in znver3 skylake-avx512 icelake-server; do \
	    $$compiler -std=c99 -O2 -march=$$cpu -I. -S -o build/mca/x86.s tests/mca/x86_regions.c || exit 1; \
	    sed -i 's#// LLVM-MCA#\# LLVM-MCA#' build/mca/x86.s; \
	    echo "$$compiler -march=$$cpu, llvm-mca -mcpu=$$cpu:"; \
	    $(MCA) -mcpu=$$cpu -iterations=100 build/mca/x86.s 2>/dev/null | awk -f tests/mca/summary.awk || exit 1; \
	  done; \
	done
	@for compiler in "$(AARCH64)gcc" "clang --target=aarch64-linux-gnu"; do \
	  for march in armv8.2-a+dotprod armv8-a; do \
	    $$compiler -std=c99 -O2 -march=$$march -I. -S -o build/mca/regions.s tests/mca/neon_gemv_regions.c || exit 1; \
	    sed -i 's#// LLVM-MCA#\# LLVM-MCA#' build/mca/regions.s; \
	    for cpu in cortex-a55 cortex-a57; do \
	      echo "$$compiler -march=$$march, llvm-mca -mcpu=$$cpu:"; \
	      $(MCA) -mtriple=aarch64 -mcpu=$$cpu -iterations=100 build/mca/regions.s 2>/dev/null | \
	        awk -f tests/mca/summary.awk || exit 1; \
	    done; \
	  done; \
	done

# Firmware-style embedding (examples/firmware): the single header on the
# "none" platform, the models linked in as const arrays, one static arena.
# Two runs: stories260K in f32, whose ids must equal llama2.c's greedy
# continuation of "Once upon a time"; and the full stack from pmpd-convert's
# pipeline (nested weights + learned scheduler + PQ KV cache), whose ids must
# equal pmpd-run's on the same container with the same settings (built with
# the same ARCH_FLAGS, so both run the same kernels: the nested GEMV's SIMD
# and scalar paths round differently).
FIRMWARE_IDS := ../shared/vectors/stories260K_once_greedy.ids
FULL_MODEL := $(BUILD)/stories260K-full.pmpd
$(FULL_MODEL): $(BUILD)/pmpd-convert
	$(BUILD)/pmpd-convert $(MODELS)/stories260K.bin $@ --tokenizer $(MODELS)/tok512.bin \
	  --type anyprec --bits 2:4 --pmpd-calibrate --kv-codebooks 2:8 --ctx 64

firmware-example: build/pmpd.h $(DEMO_MODEL) $(FULL_MODEL) $(BUILD)/pmpd-run
	@mkdir -p build/firmware
	sh examples/firmware/embed-model.sh $(DEMO_MODEL) firmware_float_blob > build/firmware/float_blob.c
	sh examples/firmware/embed-model.sh $(FULL_MODEL) firmware_full_blob > build/firmware/full_blob.c
	$(CC) $(AMALG_FLAGS) $(ARCH_FLAGS) -O2 -DPMPD_PLATFORM_NONE=1 -Iexamples/firmware -o build/firmware/firmware \
	  examples/firmware/main.c build/firmware/float_blob.c build/firmware/full_blob.c -lm
	./build/firmware/firmware > build/firmware/output.txt
	@grep -v '^ids ' build/firmware/output.txt
	@n=$$(grep '^ids f32' build/firmware/output.txt | cut -d: -f2 | wc -w); \
	if [ -f $(FIRMWARE_IDS) ]; then \
	  grep '^ids f32' build/firmware/output.txt | cut -d: -f2 | tr ' ' '\n' | grep . > build/firmware/ids.txt; \
	  tr ' ' '\n' < $(FIRMWARE_IDS) | head -$$n | cmp -s - build/firmware/ids.txt && \
	  echo "firmware-example: f32: $$n ids equal llama2.c's" || { echo "firmware-example: f32 ids differ from llama2.c's"; exit 1; }; \
	fi; \
	grep '^ids full' build/firmware/output.txt | cut -d: -f2 | tr ' ' '\n' | grep . > build/firmware/full_ids.txt; \
	$(BUILD)/pmpd-run $(FULL_MODEL) -p "Once upon a time" -t 0 --ctx 64 -n 64 --ignore-eos --kv pq --learned --ids \
	  2>/dev/null | tr ' ' '\n' | head -$$n > build/firmware/run_ids.txt; \
	cmp -s build/firmware/run_ids.txt build/firmware/full_ids.txt && \
	  echo "firmware-example: full stack: $$n ids equal pmpd-run's (--kv pq --learned, same container)" || \
	  { echo "firmware-example: full-stack ids differ from pmpd-run's"; exit 1; }

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(LIB) $(OFFLINE_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 pmpd.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^#define PMPD_VERSION_STRING "\(.*\)"/\1/p' pmpd.h)|g' \
	  pmpd_impl/build/pmpd.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/pmpd.pc

clean:
	rm -rf build

help:
	@echo "make              library (build/libpmpd.a, build/libpmpd_offline.a) and examples"
	@echo "make check        every test: native, ASan+UBSan, amalgamation (gcc, clang), clang over every"
	@echo "                  compile-time ISA (check-isas), heap check,"
	@echo "                  fuzz corpora replay, aarch64 under qemu (-cpu max and cortex-a53),"
	@echo "                  32-bit armhf under qemu-arm, oracles (llama.cpp via npm node-llama-cpp)"
	@echo "make check-oracles  only the tests against npm oracles (tests/oracle/run.sh)"
	@echo "make demo         convert stories260K and generate a story"
	@echo "make bench        benchmarks (memory bandwidth, kernels, end to end)"
	@echo "make bench-compare  pmpd beside llama.cpp on a 1.1B synthetic model (bench/compare.sh)"
	@echo "make mca          llvm-mca cycles of the NEON GEMV loops (nested 2/3/4 bits, q8, q4, q2cb, vq)"
	@echo "make firmware-example  single header + none platform + model in a const array"
	@echo "make amalgamation build/pmpd.h, the single-header library"
	@echo "make fuzz FUZZ_SECONDS=N   run every libFuzzer harness for N seconds"
	@echo "make size         text/data/bss of the runtime, host and aarch64"
	@echo "make install PREFIX=... DESTDIR=..."

-include $(shell find $(BUILD)/obj $(BUILD)/tests -name '*.d' 2>/dev/null)
-include $(shell find build/fuzz/obj -name '*.d' 2>/dev/null)
