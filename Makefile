# w8a8 — build with `make`, test with `make test`, run the demo with `make demo`.
# Detects CUDA (nvcc), NCCL and MPI; builds a CPU-only library where they are missing.
#
#   make                 library (build/lib), CLI (build/bin/w8a8), tests
#   make test            every CPU/MPI test, ASan+UBSan tests, a short fuzz run; ends "N passed, N failed"
#   make gpu-test        the GPU suite (needs a GPU), also under compute-sanitizer
#   make demo            the main job: w8a8 demo on the best device
#   make install PREFIX=/usr/local
#   Variables: CUDA_HOME, CUDA_ARCHS="75 80 89 90a", CUDA_ARCHS_PTX="75 89", NO_CUDA=1, NO_MPI=1, FUZZ_SECONDS=60
#
# CUDA architectures: CUDA_ARCHS gets machine code (SASS) for each (90a: the Hopper kernels; only with it does
# the library run them), CUDA_ARCHS_PTX PTX for each, which the driver compiles for newer GPUs. The default
# fatbin: SASS for sm_75, sm_80 (also sm_86), sm_89, sm_90a; compute_75 PTX, and compute_89 PTX so that a GPU
# newer than all of them (the driver JITs the newest PTX it can) keeps fp8 on the portable kernel. A PTX-only library (the
# portable kernels run through the driver's JIT):   make CUDA_ARCHS= CUDA_ARCHS_PTX="75 80 89"
# An architecture this nvcc cannot compile for (nvcc --list-gpu-arch) is left out with a warning; PTX asked
# for but none left: the oldest it has.

PREFIX     ?= /usr/local
BUILD      ?= build
CC         ?= gcc
CUDA_HOME  ?= /usr/local/cuda
CUDA_ARCHS ?= 75 80 89 90a
CUDA_ARCHS_PTX ?= 75 89
FUZZ_SECONDS ?= 60

OPT        ?= -O3
CSTD       := -std=c11 -D_GNU_SOURCE
WARN       := -Wall -Wextra -Werror -Wno-unknown-pragmas
CFLAGS_ALL := $(CSTD) $(OPT) -g -fPIC -fvisibility=hidden -fopenmp $(WARN) -Iinclude -Isrc $(CFLAGS)
LDLIBS_ALL := $(LDFLAGS) -fopenmp -lm -lpthread

# ---- feature detection -------------------------------------------------------
NVCC := $(if $(NO_CUDA),,$(shell command -v nvcc 2>/dev/null || ( test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc )))
MPICC := $(if $(NO_MPI),,$(shell command -v mpicc 2>/dev/null))
NCCL_H := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
FEATURES := cpu
ifneq ($(NVCC),)
  CUDA_INC  := $(CUDA_HOME)/include
  CUDA_LIB  := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
  NVCC_ARCHS := $(patsubst compute_%,%,$(shell $(NVCC) --list-gpu-arch 2>/dev/null))
  nvcc_has   = $(if $(NVCC_ARCHS),$(filter $(patsubst %a,%,$(1)),$(NVCC_ARCHS)),$(1))
  ARCHS_SASS := $(foreach a,$(CUDA_ARCHS),$(if $(call nvcc_has,$(a)),$(a)))
  ARCHS_PTX  := $(foreach a,$(CUDA_ARCHS_PTX),$(if $(call nvcc_has,$(a)),$(a)))
  ARCHS_PTX  := $(if $(CUDA_ARCHS_PTX),$(or $(ARCHS_PTX),$(firstword $(NVCC_ARCHS))))
  ARCHS_LEFT := $(filter-out $(ARCHS_SASS) $(ARCHS_PTX),$(CUDA_ARCHS) $(CUDA_ARCHS_PTX))
  $(if $(ARCHS_LEFT),$(warning $(NVCC) cannot compile for $(ARCHS_LEFT): left out of the fatbin))
  $(if $(ARCHS_SASS)$(ARCHS_PTX),,$(error CUDA_ARCHS and CUDA_ARCHS_PTX name no architecture this nvcc has))
  GENCODE   := $(foreach a,$(ARCHS_SASS),-gencode=arch=compute_$(a),code=sm_$(a)) \
               $(foreach a,$(ARCHS_PTX),-gencode=arch=compute_$(a),code=compute_$(a))
  # The host side of the Hopper path must know whether sm_90a code is in the fatbin (any other code
  # holds its kernels' empty bodies).
  GENCODE   += $(if $(filter 90a,$(ARCHS_SASS)),-DW8A8_HAVE_SM90A)
  # NVCCWERROR= (empty) lets a diagnostic build through, e.g. the timeline build, whose stamps spill.
  NVCCWERROR ?= -Werror all-warnings
  # Split compilation (nvcc >= 12.1): cicc and ptxas optimize a file's kernels on every core, which matters for the
  # ~160 kernels of src/cuda/sm90_gemm.cu (on 2 cores: 120 s -> ~65-95 s; the machine code is unchanged apart from
  # independent instructions swapped in a few kernels). NVCCSPLIT= (empty) turns it off.
  NVCCSPLIT ?= $(if $(shell $(NVCC) --help 2>/dev/null | grep -e '--split-compile '),--split-compile=0)
  NVCCFLAGS := -O3 -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden -Iinclude -Isrc $(GENCODE) -lineinfo \
               --expt-relaxed-constexpr -Xptxas -warn-spills $(NVCCWERROR) $(NVCCSPLIT) $(NVCCEXTRA)
  CFLAGS_ALL += -DW8A8_HAVE_CUDA -I$(CUDA_INC)
  # nvcc's host stubs use guarded statics and C++ EH: the C link needs libstdc++
  LDLIBS_ALL += -L$(CUDA_LIB) -lcudart_static -lcuda_driver_stub_none -ldl -lrt -lstdc++
  FEATURES  += cuda($(strip $(ARCHS_SASS) $(if $(ARCHS_PTX),ptx:$(subst $(eval) ,+,$(ARCHS_PTX)))))
  # cuBLASLt: benchmark baselines only (tools/bench_cuda.c), never linked into the library
  CLI_LIBS  += -lcublasLt -Wl,-rpath,$(CUDA_LIB)
  ifneq ($(NCCL_H),)
    NCCL_LIBDIR := $(firstword $(foreach d,$(CUDA_LIB) /usr/lib/x86_64-linux-gnu /usr/local/lib,$(if $(wildcard $(d)/libnccl.so*),$(d))))
    ifneq ($(NCCL_LIBDIR),)
      CFLAGS_ALL += -DW8A8_HAVE_NCCL -I$(dir $(NCCL_H))
      LDLIBS_ALL += -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl
      FEATURES   += nccl
    endif
  endif
endif
# libcuda is loaded by cudart at run time; no link-time stub needed.
LDLIBS_ALL := $(filter-out -lcuda_driver_stub_none,$(LDLIBS_ALL))
ifneq ($(MPICC),)
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
  CFLAGS_ALL += -DW8A8_HAVE_MPI $(MPI_CFLAGS)
  LDLIBS_ALL += $(MPI_LIBS)
  FEATURES   += mpi
endif
CFLAGS_ALL += -DW8A8_FEATURES='"$(FEATURES)"'
# oneDNN and OpenBLAS: CPU benchmark baselines for the CLI only (tools/bench_cpu.c); the library
# never links them. NO_DNNL=1 / NO_OPENBLAS=1 leave them out.
DNNL_H      := $(if $(NO_DNNL),,$(firstword $(wildcard /usr/include/oneapi/dnnl/dnnl.h /usr/local/include/oneapi/dnnl/dnnl.h)))
CBLAS_H     := $(if $(NO_OPENBLAS),,$(firstword $(wildcard /usr/include/x86_64-linux-gnu/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h)))
OPENBLAS_SO := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib64/libopenblas.so /usr/lib/libopenblas.so /usr/local/lib/libopenblas.so))
ifneq ($(DNNL_H),)
  CLI_CFLAGS += -DW8A8_HAVE_DNNL
  CLI_LIBS   += -ldnnl
endif
ifneq ($(and $(CBLAS_H),$(OPENBLAS_SO)),)
  CLI_CFLAGS += -DW8A8_HAVE_OPENBLAS -I$(dir $(CBLAS_H))
  CLI_LIBS   += -lopenblas
endif

# ---- sources -------------------------------------------------------------------
# The sm_90a planner and the CUDA dispatcher's rule are plain C (src/cuda/sm90_plan.c, dispatch_rule.c): every
# build has them, so that the CPU tests check their choices.
SM90_PLAN_C := src/cuda/sm90_plan.c
DISPATCH_RULE_C := src/cuda/dispatch_rule.c
LIB_C  := $(wildcard src/core/*.c src/cpu/*.c src/tp/*.c) $(SM90_PLAN_C) $(DISPATCH_RULE_C)
ifneq ($(NVCC),)
  LIB_C  += $(filter-out $(SM90_PLAN_C) $(DISPATCH_RULE_C),$(wildcard src/cuda/*.c))
  LIB_CU := $(wildcard src/cuda/*.cu src/tp/*.cu)
endif
LIB_OBJ := $(LIB_C:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.cu.o)
CLI_C   := $(wildcard tools/*.c)
$(CLI_C:%.c=$(BUILD)/obj/%.o): CFLAGS_ALL += $(CLI_CFLAGS)
# the tools' own headers (the library's are in each object rule); test_cli.c compiles the CLI's parsers in
$(CLI_C:%.c=$(BUILD)/obj/%.o): $(wildcard tools/*.h)
$(BUILD)/obj/tests/test_cli.o: tools/cli_common.c tools/cli_common.h tools/cli_json.c tools/cli_json.h
TEST_C  := $(filter-out tests/fuzz_%.c,$(wildcard tests/*.c))

LIBA  := $(BUILD)/lib/libw8a8.a
LIBSO := $(BUILD)/lib/libw8a8.so
CLI   := $(BUILD)/bin/w8a8
TESTS := $(BUILD)/bin/w8a8_tests
# The MPI tests (tests/mpi/*.c with the shared runner): tests/run_all.sh runs them under mpirun -np 1..4.
TP_TEST_C := $(if $(MPICC),$(wildcard tests/mpi/*.c))
TP_TESTS  := $(if $(TP_TEST_C),$(BUILD)/bin/w8a8_tp_tests)

.PHONY: all lib cli tests test gpu-test demo install clean config asan fuzz deps
all: config lib cli tests

config:
	@echo "w8a8 build: features = $(FEATURES)"
	@echo "  nvcc: $(if $(NVCC),$(NVCC),not found (CPU-only build))"
	@echo "  nccl: $(if $(findstring nccl,$(FEATURES)),$(NCCL_H),not found)"
	@echo "  mpi:  $(if $(MPICC),$(MPICC),not found (no MPI tensor parallelism))"
	@echo "  cpu bench baselines: oneDNN $(if $(DNNL_H),$(DNNL_H),not found), OpenBLAS $(if $(findstring OPENBLAS,$(CLI_CFLAGS)),$(CBLAS_H),not found)"

lib: $(LIBA) $(LIBSO)
cli: $(CLI)
tests: $(TESTS) $(TP_TESTS)

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# With NVCCWERROR (the default), ptxas's C751x infos fail the build too: "wgmma.mma_async instructions are
# serialized" (C7514 / C7515) or "warpgroup.wait is injected" (C7517) mean a main loop lost its overlap,
# which ptxas otherwise reports without any warning. The ptxas report is kept beside the object
# ($@.ptxas: registers, spills per kernel).
$(BUILD)/obj/%.cu.o: %.cu $(wildcard include/*.h src/*/*.h src/cuda/*.cuh)
	@mkdir -p $(dir $@)
ifneq ($(NVCCWERROR),)
	$(NVCC) $(NVCCFLAGS) -Xptxas -v -c $< -o $@ 2> $@.ptxas; s=$$?; grep -v '^ptxas info\|^    [0-9]* bytes' $@.ptxas >&2; \
	  [ $$s -eq 0 ] || exit $$s; \
	  if grep -q 'C751[0-9]' $@.ptxas; then grep 'C751[0-9]' $@.ptxas >&2; \
	    echo "$<: ptxas serialized wgmma or injected a wait (C751x above); see the Makefile" >&2; rm -f $@; exit 1; fi
else
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
endif

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBSO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -Wl,-soname,libw8a8.so.0 $(LDLIBS_ALL)

$(CLI): $(CLI_C:%.c=$(BUILD)/obj/%.o) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL) $(CLI_LIBS)

$(TESTS): $(TEST_C:%.c=$(BUILD)/obj/%.o) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bin/w8a8_tp_tests: $(BUILD)/obj/tests/test_main.o $(TP_TEST_C:%.c=$(BUILD)/obj/%.o) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

# ---- running ---------------------------------------------------------------------
deps:
	@sh tools/install-deps.sh

test: deps
	@$(MAKE) --no-print-directory all asan fuzz
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/run_all.sh

gpu-test: all
	@BUILD=$(BUILD) sh tests/run_gpu.sh

demo: deps
	@$(MAKE) --no-print-directory all
	$(CLI) demo

install: lib cli
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/w8a8.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libw8a8.so.0
	ln -sf libw8a8.so.0 $(DESTDIR)$(PREFIX)/lib/libw8a8.so
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/w8a8 && install -m 644 bench/plot.py $(DESTDIR)$(PREFIX)/share/w8a8/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|0.1.0|' -e 's|@LIBS@|$(LDLIBS_ALL)|' w8a8.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/w8a8.pc
	install -d $(DESTDIR)$(PREFIX)/lib/cmake/w8a8
	for f in w8a8Config w8a8ConfigVersion; do sed -e 's|@VERSION@|0.1.0|' cmake/$$f.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/w8a8/$$f.cmake; done

# ---- sanitizer and fuzz builds (CPU only: CI has no GPU) -------------------------------
# asan: the whole test binary under AddressSanitizer + UBSan, in $(BUILD)-asan.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)-asan NO_CUDA=1 NO_MPI=1 OPT=-O1 \
	  CFLAGS="$(SAN_FLAGS)" LDFLAGS="$(SAN_FLAGS)" $(BUILD)-asan/bin/w8a8_tests

# fuzz: libFuzzer targets over the validation layer (fuzz_validate) and the tuning-table parser
# (fuzz_tune); the library's core and CPU sources are compiled into them with clang, sanitizers on,
# without CUDA or MPI. Library sources get -Wall -Wextra (the gcc build enforces -Werror on
# them); the fuzzers themselves -Werror.
FUZZ_CC    ?= clang
FUZZ_FLAGS := $(CSTD) -O1 -g -fopenmp -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
              -Iinclude -Isrc -Wall -Wextra -Wno-unknown-pragmas
# clang ignores `#pragma GCC target("avx2,...")` (src/cpu): build the fuzzer for AVX2+FMA+F16C
# machines (this one and CI's) instead.
FUZZ_FLAGS += $(if $(filter x86_64,$(shell uname -m)),-mavx2 -mfma -mf16c)
FUZZ_LIB_C := $(wildcard src/core/*.c src/cpu/*.c) $(SM90_PLAN_C)
FUZZ_BIN   := $(BUILD)/bin/fuzz_validate
FUZZ_TUNE_BIN := $(BUILD)/bin/fuzz_tune
fuzz:
	@if command -v $(FUZZ_CC) >/dev/null 2>&1; then $(MAKE) --no-print-directory $(FUZZ_BIN) $(FUZZ_TUNE_BIN); \
	 else echo "fuzz: $(FUZZ_CC) not found; skipping the fuzz build (install clang, libclang-rt-14-dev)"; fi

$(FUZZ_BIN): tests/fuzz_validate.c $(FUZZ_LIB_C) $(wildcard include/*.h src/*/*.h)
	@mkdir -p $(dir $@) $(BUILD)/fuzz-obj
	cd $(BUILD)/fuzz-obj && $(FUZZ_CC) $(FUZZ_FLAGS:-I%=-I$(CURDIR)/%) -fsanitize=fuzzer-no-link \
	  -DW8A8_FEATURES='"cpu fuzz"' -c $(FUZZ_LIB_C:%=$(CURDIR)/%)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Werror -o $@ tests/fuzz_validate.c $(BUILD)/fuzz-obj/*.o -lm -lpthread
# the tuning-table parser's target (tests/fuzz_tune.c), on the same objects
$(FUZZ_TUNE_BIN): tests/fuzz_tune.c $(FUZZ_BIN)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Werror -o $@ tests/fuzz_tune.c $(BUILD)/fuzz-obj/*.o -lm -lpthread

clean:
	rm -rf $(BUILD)
