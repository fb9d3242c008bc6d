# stepblame — build, test, demo.
#
#   make            build everything that does not need CUDA (build/)
#   make static     a fully static build/static/stepblame
#   make deps       install the build dependencies (Debian/Ubuntu, as root)
#   make test       build with ASan+UBSan (build/san/) and run the tests (root for BPF tests)
#   make demo       build, run simtrainer with injected interference, print the report
#   make bench      overhead benchmarks (bench/RESULTS.md)
#   make fuzz       run the fuzz targets FUZZ_SECONDS (60) each (tests/fuzz/README.md)
#   make install    install under PREFIX (/usr/local; DESTDIR for a staging root)
#   make deb        build/stepblame_VERSION_ARCH.deb (dpkg-deb)
#   make python     build/wheel/stepblame-*.whl, the Python package with the marker library

CLANG    ?= clang
CC       ?= cc
BPFTOOL  ?= bpftool
ARCH     := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

SAN ?= 0
ifeq ($(SAN),1)
BUILD    ?= build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD    ?= build
SANFLAGS :=
# the engine is one streaming pass in several files (docs/ARCHITECTURE.md): link-time
# optimisation inlines across them again (bench/RESULTS.md, section 9)
LTOFLAGS ?= -flto=auto
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	    -D_GNU_SOURCE -I$(BUILD) -I. -Iuser -Iinclude $(SANFLAGS) $(LTOFLAGS)
LDFLAGS  += $(SANFLAGS) $(LTOFLAGS)
LIBS     := -lbpf -ldw -lelf -lzstd -lz -lm -lpthread
# attach --metrics-addr: libmicrohttpd; the static build goes without (its TLS
# dependencies do not link statically)
# a static link also needs what libdw.a decompresses with
LIBS     += $(STATIC_LIBS)
METRICS_SERVER ?= 1
ifeq ($(METRICS_SERVER),1)
LIBS     += -lmicrohttpd
else
CFLAGS   += -DSTEPBLAME_NO_METRICS_SERVER
endif
# BPF_EXTRA: more clang flags for the BPF objects (bench/floor.py builds with -DSB_BENCH_HOLLOW)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(BUILD) -Ibpf -Wall \
	      -I/usr/include/$(shell gcc -print-multiarch 2>/dev/null) \
	      -Wno-unused-variable -Wno-unused-function $(BPF_EXTRA)

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

USER_SRCS := $(wildcard user/*/*.c)
USER_OBJS := $(patsubst user/%.c,$(BUILD)/user/%.o,$(USER_SRCS))
# everything but main: linked into the tests too
LIB_OBJS  := $(filter-out $(BUILD)/user/cmd/main.o,$(USER_OBJS))

SIM_SRCS  := $(wildcard sim/*.c)
SIM_BIN   := $(if $(SIM_SRCS),$(BUILD)/simtrainer)

UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
BPFT_SRCS := $(wildcard tests/bpf/*.c)
BPFT_BINS := $(patsubst tests/bpf/%.c,$(BUILD)/tests/bpf/%,$(BPFT_SRCS))
# programs the tests trace: never sanitized (ASan replaces malloc, hiding it from uprobes)
PROG_SRCS := $(wildcard tests/progs/*.c)
PROG_BINS := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(PROG_SRCS))
# the user-stack target again, without frame pointers: its stacks are walked by call-frame information
PROG_BINS += $(BUILD)/tests/progs/sbstack-nofp
# libraries the tests load into running programs: never sanitized
TLIB_SRCS := $(wildcard tests/libs/*.c)
TLIB_SOS  := $(patsubst tests/libs/%.c,$(BUILD)/tests/libs/lib%.so,$(TLIB_SRCS))

MARKER_LIB := $(BUILD)/libstepblame.so

# The CUPTI collector is built only where a CUDA toolkit with CUPTI is found.
CUDA_HOME   ?= /usr/local/cuda
CUPTI_INC   := $(firstword $(wildcard $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/extras/CUPTI/include/cupti.h))
CUPTI_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so $(CUDA_HOME)/lib/libcupti.so))))
ifneq ($(and $(CUPTI_INC),$(CUPTI_LIBDIR)),)
HAVE_CUPTI  := 1
CUPTI_CFLAGS := -I$(dir $(CUPTI_INC)) -I$(CUDA_HOME)/include
CUPTI_LIBS  := -L$(CUPTI_LIBDIR) -Wl,-rpath,$(CUPTI_LIBDIR) -lcupti
CUPTI_SRCS  := $(wildcard cupti/*.c)
COLLECTOR   := $(if $(CUPTI_SRCS),$(BUILD)/libstepblame-cupti.so)
CUPTI_TEST_SRCS := $(wildcard tests/cupti/*.c)
CUPTI_TEST_BINS := $(patsubst tests/cupti/%.c,$(BUILD)/tests/cupti/%,$(CUPTI_TEST_SRCS))
endif

.PHONY: all static deps check-deps test test-bin demo bench fuzz clean man install deb python
.DELETE_ON_ERROR:

all: check-deps $(BUILD)/stepblame $(SIM_BIN) $(MARKER_LIB) $(COLLECTOR) test-bin

# Say exactly what is missing instead of failing halfway through.
check-deps:
	@missing=""; \
	command -v $(CLANG) >/dev/null || missing="$$missing clang"; \
	command -v $(BPFTOOL) >/dev/null || missing="$$missing bpftool"; \
	command -v llvm-strip >/dev/null || missing="$$missing llvm"; \
	[ -f /usr/include/bpf/libbpf.h ] || missing="$$missing libbpf-dev"; \
	[ -f /usr/include/libelf.h ] || missing="$$missing libelf-dev"; \
	[ -f /usr/include/elfutils/libdwfl.h ] || missing="$$missing libdw-dev"; \
	[ -f /usr/include/zlib.h ] || missing="$$missing zlib1g-dev"; \
	[ -f /usr/include/zstd.h ] || missing="$$missing libzstd-dev"; \
	[ "$(METRICS_SERVER)" != 1 ] || [ -f /usr/include/microhttpd.h ] || missing="$$missing libmicrohttpd-dev"; \
	[ -f /usr/include/$$(gcc -print-multiarch 2>/dev/null)/sys/sdt.h ] || [ -f /usr/include/sys/sdt.h ] || missing="$$missing systemtap-sdt-dev"; \
	[ -f /usr/lib/$$(gcc -print-multiarch 2>/dev/null)/libc.a ] || [ -f /usr/lib/libc.a ] || missing="$$missing libc6-dev"; \
	if [ -n "$$missing" ]; then \
		echo "stepblame: missing build dependencies:$$missing"; \
		echo "  install them with: sudo apt-get install$$missing   (or: sudo make deps)"; \
		exit 1; \
	fi; \
	if [ ! -r /sys/kernel/btf/vmlinux ]; then \
		echo "stepblame: this kernel has no BTF (/sys/kernel/btf/vmlinux); CO-RE needs CONFIG_DEBUG_INFO_BTF=y"; \
		exit 1; \
	fi

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root (sudo make deps)"; exit 1; fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		make gcc libc6-dev clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev \
		libzstd-dev zstd systemtap-sdt-dev libclang-rt-dev libmicrohttpd-dev pkg-config python3 python3-torch \
		python3-pip python3-setuptools python3-wheel python3-venv chromium fonts-dejavu-core

$(BUILD) $(BUILD)/sim $(BUILD)/tests/unit $(BUILD)/tests/bpf $(BUILD)/tests/progs $(BUILD)/tests/libs $(BUILD)/tests/cupti:
	@mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c bpf/events.h $(wildcard bpf/*.bpf.h) $(BUILD)/vmlinux.h | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@
	llvm-strip -g $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(BUILD)/user/%.o: user/%.c $(wildcard user/*/*.h) bpf/events.h $(BPF_SKELS) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# the HTML report's page, as a C string (user/report/html.c)
$(BUILD)/html_page.h: user/report/html_page.html | $(BUILD)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@

$(BUILD)/user/report/html.o: $(BUILD)/html_page.h

$(BUILD)/stepblame: $(USER_OBJS)
	$(CC) $(LDFLAGS) $^ $(LIBS) -o $@

# simtrainer: its own sources plus the channel producer and marker code it shares
$(BUILD)/sim/%.o: sim/%.c $(wildcard sim/*.h) $(wildcard user/format/*.h) $(wildcard include/*.h) | $(BUILD)/sim
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/simtrainer: $(patsubst sim/%.c,$(BUILD)/sim/%.o,$(SIM_SRCS)) $(BUILD)/user/format/channel.o
	$(CC) $(LDFLAGS) $^ -lpthread -lm -o $@

$(MARKER_LIB): lib/marker.c include/stepblame.h | $(BUILD)
	$(CC) $(CFLAGS) -fPIC -shared -Wl,-soname,libstepblame.so $< -o $@

test-bin: $(UNIT_BINS) $(BPFT_BINS) $(PROG_BINS) $(TLIB_SOS) $(CUPTI_TEST_BINS)

# injected into foreign processes: never sanitized, channel producer built in
$(BUILD)/libstepblame-cupti.so: $(CUPTI_SRCS) $(wildcard cupti/*.h) user/format/channel.c $(wildcard user/format/*.h) user/base/clock.h bpf/events.h | $(BUILD)
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fPIC -shared \
		-fvisibility=hidden -I. -Iuser $(CUPTI_CFLAGS) $(CUPTI_SRCS) user/format/channel.c \
		$(CUPTI_LIBS) -lpthread -Wl,-soname,libstepblame-cupti.so -o $@

$(BUILD)/tests/cupti/%: tests/cupti/%.c $(CUPTI_SRCS) $(wildcard cupti/*.h) $(LIB_OBJS) | $(BUILD)/tests/cupti
	$(CC) $(CFLAGS) $(CUPTI_CFLAGS) -Itests -Icupti $< $(CUPTI_SRCS) $(LIB_OBJS) $(LDFLAGS) \
		$(CUPTI_LIBS) $(LIBS) -o $@

# the user-stack tests' target unwinds by frame pointers
$(BUILD)/tests/progs/sbstack: PROG_CFLAGS := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
$(BUILD)/tests/progs/sbmaps: PROG_CFLAGS := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
$(BUILD)/tests/progs/sbvdso: PROG_CFLAGS := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
$(BUILD)/tests/progs/sbstatic: PROG_CFLAGS := -static
# the library loaded into it finds sbinject_note() by dlsym
$(BUILD)/tests/progs/sbinject: PROG_CFLAGS := -rdynamic

$(BUILD)/tests/progs/%: tests/progs/%.c $(wildcard include/*.h) | $(BUILD)/tests/progs
	$(CC) -O1 -g -std=gnu11 -Wall -Wextra -D_GNU_SOURCE $(PROG_CFLAGS) -Iinclude $< -lpthread -o $@

$(BUILD)/tests/progs/sbstack-nofp: tests/progs/sbstack.c $(wildcard include/*.h) | $(BUILD)/tests/progs
	$(CC) -O1 -g -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -fomit-frame-pointer -Iinclude $< -lpthread -o $@

$(BUILD)/tests/libs/lib%.so: tests/libs/%.c user/format/channel.c $(wildcard user/format/*.h) bpf/events.h | $(BUILD)/tests/libs
	$(CC) -O1 -g -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -fPIC -shared -fvisibility=hidden -I. -Iuser \
		$< user/format/channel.c -lpthread -o $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS) $(wildcard tests/*.h) | $(BUILD)/tests/unit
	$(CC) $(CFLAGS) -Itests $< $(LIB_OBJS) $(LDFLAGS) $(LIBS) -o $@

$(BUILD)/tests/bpf/%: tests/bpf/%.c $(LIB_OBJS) $(wildcard tests/*.h) | $(BUILD)/tests/bpf
	$(CC) $(CFLAGS) -Itests $< $(LIB_OBJS) $(LDFLAGS) $(LIBS) -o $@

# one binary with no shared libraries at all: copy it to any machine with BTF
static:
	$(MAKE) BUILD=build/static SAN=0 METRICS_SERVER=0 check-deps build/static/stepblame LDFLAGS="-static" \
		STATIC_LIBS="-lbz2 -llzma"

# make test and make demo compile on every CPU unless make was given its own -j
JOBS = $(if $(findstring j,$(filter-out --%,$(MAKEFLAGS))),,-j$(shell nproc 2>/dev/null || echo 1))

test:
	@if [ "$$(id -u)" = 0 ] && ! $(MAKE) -s check-deps >/dev/null 2>&1; then $(MAKE) deps; fi
	$(MAKE) $(JOBS) SAN=1 all
	$(MAKE) $(JOBS) all
	BUILD=build/san PLAIN_SIMTRAINER=$(CURDIR)/build/simtrainer ./tests/run

demo:
	@if [ "$$(id -u)" = 0 ] && ! $(MAKE) -s check-deps >/dev/null 2>&1; then $(MAKE) deps; fi
	$(MAKE) $(JOBS) all
	./$(BUILD)/stepblame demo

bench: all
	./bench/run

# libFuzzer targets (trace reader, channel reader, CUPTI translation); FUZZ_SECONDS each
FUZZ_SECONDS ?= 60
fuzz: check-deps
	BUILD=$(BUILD) ./tests/fuzz/run.sh $(FUZZ_SECONDS)

# ---- installed like a system tool ----
PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin
LIBDIR    ?= $(PREFIX)/lib
PKGLIBDIR ?= $(LIBDIR)/stepblame
INCDIR    ?= $(PREFIX)/include
MANDIR    ?= $(PREFIX)/share/man
COMPDIR   ?= $(PREFIX)/share/bash-completion/completions
UNITDIR   ?= $(LIBDIR)/systemd/system
DOCDIR    ?= $(PREFIX)/share/doc/stepblame
VERSION   := $(shell sed -n 's/^\#define STEPBLAME_VERSION "\(.*\)"/\1/p' user/base/util.h)

# one page per command, from the same text as its --help (dist/mkman.sh)
man: $(BUILD)/stepblame
	sh dist/mkman.sh $(BUILD)/stepblame $(BUILD)/man

# the program; simtrainer (for demo) and the GPU collector (for run) where they look:
# LIBDIR/stepblame; the step marker library and its header; the man pages, bash
# completion, the systemd unit of watch; the documents
install: check-deps $(BUILD)/stepblame $(SIM_BIN) $(MARKER_LIB) $(COLLECTOR) man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGLIBDIR) $(DESTDIR)$(INCDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(COMPDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(BUILD)/stepblame $(DESTDIR)$(BINDIR)/stepblame
	install -m 0755 $(BUILD)/simtrainer $(DESTDIR)$(PKGLIBDIR)/simtrainer
	$(if $(COLLECTOR),install -m 0644 $(COLLECTOR) $(DESTDIR)$(PKGLIBDIR)/)
	install -m 0644 $(MARKER_LIB) $(DESTDIR)$(LIBDIR)/libstepblame.so
	install -m 0644 include/stepblame.h $(DESTDIR)$(INCDIR)/stepblame.h
	install -d $(DESTDIR)$(PKGLIBDIR)/python/stepblame/_autorun
	install -m 0644 python/stepblame/*.py $(DESTDIR)$(PKGLIBDIR)/python/stepblame/
	install -m 0644 python/stepblame/_autorun/*.py $(DESTDIR)$(PKGLIBDIR)/python/stepblame/_autorun/
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 dist/stepblame.bash $(DESTDIR)$(COMPDIR)/stepblame
	sed 's|@BINDIR@|$(BINDIR)|' dist/stepblame-watch.service > $(DESTDIR)$(UNITDIR)/stepblame-watch.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/stepblame-watch.service
	install -d $(DESTDIR)$(DOCDIR)/schemas $(DESTDIR)$(DOCDIR)/docs
	install -m 0644 README.md SECURITY.md dist/stepblame-watch.default $(DESTDIR)$(DOCDIR)/
	install -m 0644 schemas/* $(DESTDIR)$(DOCDIR)/schemas/
	install -m 0644 docs/* $(DESTDIR)$(DOCDIR)/docs/

# the Python package (python/README.md) as a wheel for this platform that carries the
# marker library: pip install build/wheel/stepblame-*.whl
python: $(MARKER_LIB)
	@/usr/bin/python3 -c 'import setuptools, wheel, pip' 2>/dev/null || { echo "make python: \
missing python3-setuptools python3-wheel python3-pip (sudo make deps)"; exit 1; }
	rm -rf $(BUILD)/python-src $(BUILD)/wheel
	mkdir -p $(BUILD)/python-src/stepblame/_autorun $(BUILD)/wheel
	cp python/pyproject.toml python/setup.py python/README.md $(BUILD)/python-src/
	cp python/stepblame/*.py $(BUILD)/python-src/stepblame/
	cp python/stepblame/_autorun/*.py $(BUILD)/python-src/stepblame/_autorun/
	install -m 0644 $(MARKER_LIB) $(BUILD)/python-src/stepblame/libstepblame.so
	cd $(BUILD)/python-src && /usr/bin/python3 -m pip wheel -q --no-deps --no-build-isolation \
		--no-index -w $(CURDIR)/$(BUILD)/wheel .
	@ls $(BUILD)/wheel/*.whl

# a Debian package of `make install PREFIX=/usr` (dist/mkdeb.sh)
deb:
	rm -rf $(BUILD)/deb
	$(MAKE) install PREFIX=/usr DESTDIR=$(CURDIR)/$(BUILD)/deb
	sh dist/mkdeb.sh $(BUILD)/deb $(BUILD)/stepblame_$(VERSION)_$$(dpkg --print-architecture).deb $(VERSION)
	@echo "$(BUILD)/stepblame_$(VERSION)_$$(dpkg --print-architecture).deb"

clean:
	rm -rf build
