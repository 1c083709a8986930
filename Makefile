# Everything a fresh Debian machine (as root) needs for the demo and the tests.
SHELL := /bin/bash
VENV := .venv
SIM_DIR ?= .sim/demo
# What macsim and the tests use from Debian: sshd/ssh for the simulated Macs, iproute2 and
# util-linux for namespaces, sudo and zsh as on a Mac, python3 for the nodes' interpreter,
# graphviz for topology pictures, chromium for the printable checklist test.
APT_PACKAGES := openssh-server openssh-client iproute2 util-linux sudo zsh python3 python3-venv \
	python3-pip graphviz make git ca-certificates chromium poppler-utils

# What `make bench` adds: rsync, one of the transports benchmarks/models_transport.py compares (bindep's [benchmark]).
BENCH_APT_PACKAGES := rsync

.PHONY: demo test deps bench-deps venv lint dist bench clean

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

bench-deps:
	@$(MAKE) --no-print-directory deps APT_PACKAGES="$(BENCH_APT_PACKAGES)"

venv: $(VENV)/.installed

# constraints.txt pins the controller's whole dependency tree (uv pip compile --universal --all-extras).
$(VENV)/.installed: pyproject.toml constraints.txt | deps
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $@

demo: deps venv
	SIM_DIR=$(SIM_DIR) $(VENV)/bin/python scripts/demo.py

# The suite on one worker per CPU and one more (a sim test waits on its Macs' networks part of the time), a file
# to a worker (a file's tests share its clusters), the sim files first (conftest.py), each worker in a mount
# namespace of its own (tests/xdist_worker): its simulated Macs' names are its own.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: deps venv
	$(VENV)/bin/pytest --dist loadfile --no-loadscope-reorder --tx '$(TEST_WORKERS)*popen//python=tests/xdist_worker $(VENV)/bin/python'

lint: venv
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ansible-lint --offline --profile production

# Both installable artifacts, for a controller without a clone: the wheel (the CLI, carrying the
# collection) and the collection's tarball for ansible-galaxy.
dist: venv
	rm -rf dist
	$(VENV)/bin/uv build --quiet --wheel --out-dir dist .
	$(VENV)/bin/ansible-galaxy collection build --force --output-path dist .
	@ls -1 dist

# Speed figures on simulated clusters (root): every script in benchmarks/ prints its own table
# (BENCH_ARGS go to benchmarks/bench.py, e.g. --repeat 3 --only hostfile; --baseline [REF] runs every row
# for the tree at REF too, interleaved, by default the merge-base with main).
bench: deps bench-deps venv
	$(VENV)/bin/python benchmarks/bench.py $(BENCH_ARGS)
	for script in benchmarks/*.py; do [ "$$script" = benchmarks/bench.py ] || $(VENV)/bin/python $$script || exit 1; done

clean:
	-$(VENV)/bin/mlx-fleet sim down --dir $(SIM_DIR)
	rm -rf $(VENV) build dist *.egg-info
