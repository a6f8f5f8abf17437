# gpulab: the two commands a user needs are `make lab` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: help setup image image-trixie image-arm64 lab lab-up lab-fresh lab-down converge converge-now test lint lint-python lint-ansible \
        test-payload test-collection test-sanity test-molecule test-debian13 test-faults test-mixed-arch \
        test-rollout test-upgrade test-upgrade-path test-site test-airgap test-monitoring test-scenarios fuzz-long shaders collection

help:
	@echo "make lab        install everything, build the lab image, start the lab, converge, validate, self-test"
	@echo "make test       molecule test beside lint, payload, sanity, native and collection tests (what CI runs)"
	@echo "make lab-down   remove the lab"
	@echo "make test-scenarios  the molecule scenarios CI leaves out: debian13, faults, mixed-arch, rollout, upgrade,"
	@echo "                     upgrade-path, airgap"
	@echo "make gpu-host-bundle  what scripts/gpu-host/slurm.sh needs on a GPU host (docs/hardware.md)"

setup:
	@bash scripts/setup.sh

image: setup
	@bash lab/build-image.sh

image-trixie: setup
	@bash lab/build-image.sh --suite trixie

image-arm64: setup
	@bash lab/build-image.sh --arch arm64

lab-up: image
	@bash lab/up.sh

lab-fresh: image
	@bash lab/up.sh --fresh

lab-down:
	@bash lab/down.sh

# `make lab V=1` shows every task's result and every check of the local selftest; by
# default Ansible shows only what changed or failed, and the selftest's lines go to
# build/validate/selftest-local.txt: the end of the output is the per-node table and one line.
V ?=
# `make lab` validates the lab through Slurm when the converge changed or failed something, when
# the validation play changed, or when the lab has no passed validation since its nodes were
# last started (lab/validate-reason.sh); otherwise it shows the last validation's results and
# says when they were taken. `make lab VALIDATE=1` validates in any case.
VALIDATE ?=
LAB_START := $(shell date +%s)
LAB_ANSIBLE := $(if $(V),,ANSIBLE_DISPLAY_OK_HOSTS=false ANSIBLE_DISPLAY_SKIPPED_HOSTS=false) ansible-playbook

# `make lab` converges only when lab/converge-reason.sh gives a reason: something the converge
# reads changed since the last converge that passed (the collection, inventory, playbooks, the
# payload, the lab's definition, the Ansible version), a node was created or started since, or a
# node has a failed unit or is not up in Slurm. `make lab CONVERGE=1` and `make converge`
# converge in any case.
CONVERGE ?=

# lab/standin.yml first: worker2's L4T marks (the Jetson stand-in), then what users run.
# Its output also goes to build/lab/converge.log, whose recap tells `make lab` whether the
# converge changed anything (colours kept where the output is a terminal). The record of what
# it converged from goes first and comes back only when it passed: a converge that failed
# half-way never looks like one that holds.
converge: lab-up collection converge-now

converge-now:
	@mkdir -p build/lab build/validate; rm -f build/lab/converge.log build/lab/converged
	@[ ! -e build/validate/lab-validated ] || mv build/validate/lab-validated build/lab/lab-validated.held
	ANSIBLE_FORCE_COLOR=$$([ -t 1 ] && echo 1 || echo 0) \
	  $(LAB_ANSIBLE) -i inventory/lab lab/standin.yml site.yml | tee build/lab/converge.log
	@bash lab/converge-reason.sh --record
	@echo converged >build/lab/converged-how
	@if [ -e build/lab/lab-validated.held ] && [ -z "$$(bash lab/validate-reason.sh --changed-hosts build/lab/converge.log)" ]; then \
	  mv build/lab/lab-validated.held build/validate/lab-validated; else rm -f build/lab/lab-validated.held; fi

lab: lab-up collection
	@mkdir -p build/lab
	@reason=$$(CONVERGE="$(CONVERGE)" bash lab/converge-reason.sh); \
	if [ -n "$$reason" ]; then \
	  echo "==> [lab] converge ($$reason)"; \
	  $(MAKE) --no-print-directory converge-now; \
	else \
	  since=$$(date -u -r build/lab/converged '+%F %T UTC'); \
	  echo "==> [lab] converge skipped: nothing it reads changed since the converge of $$since, every node runs" \
	    "all its units and is up in Slurm (make lab CONVERGE=1 converges anyway)"; \
	  echo "converge skipped: nothing changed since $$since" >build/lab/converge.log; \
	  echo "converge of $$since still holds" >build/lab/converged-how; \
	fi
	@echo "==> [lab] NFS substitution: storage1 serves /srv/gpulab with nfs-ganesha; this kernel has no NFS client,"
	@echo "    so lab/up.sh attaches the exported volume at /srv/gpulab on controller1 and the workers"
	@echo "    (inventory/lab/group_vars/all/storage.yml: nfs_client_mode: bind); nfs_client and validate.yml"
	@echo "    read it over NFS (libnfs nfs-cat) on every node and compare with the mount point."
	@mkdir -p build/validate
	@reason=$$(VALIDATE="$(VALIDATE)" bash lab/validate-reason.sh build/lab/converge.log); \
	if [ -n "$$reason" ]; then \
	  echo "==> [lab] validate ($$reason): gpulab devices, selftest, example graphs and saxpy bench on every worker through Slurm"; \
	  rm -f build/validate/lab-validated; \
	  $(LAB_ANSIBLE) -i inventory/lab playbooks/validate.yml; \
	  date -u '+%F %T UTC' >build/validate/lab-validated; \
	  echo "validated through Slurm" >build/lab/validated-how; \
	else \
	  echo "==> [lab] validate skipped: nothing changed on a lab validated $$(cat build/validate/lab-validated);" \
	    "the results below are that validation's (make lab VALIDATE=1 validates again)"; \
	  echo "validation of $$(cat build/validate/lab-validated) still holds (nothing changed)" >build/lab/validated-how; \
	fi
	@echo "==> [lab] gpulab selftest on this machine"
	@gpulab selftest >build/validate/selftest-local.txt 2>&1 || { cat build/validate/selftest-local.txt; exit 1; }
	@$(if $(V),cat build/validate/selftest-local.txt,true)
	@echo "==> [lab] results (build/validate/lab-report.md):"
	@sed -n '/^| node/,/^$$/p' build/validate/lab-report.md
	@echo "==> [lab] ready in $$(($$(date +%s) - $(LAB_START))) s: $$(cat build/lab/converged-how), $$(cat build/lab/validated-how);" \
	  "this machine's $$(tail -n 1 build/validate/selftest-local.txt) (build/validate/selftest-local.txt)"

collection: setup
	@bash scripts/build-collection.sh

shaders:
	@$(MAKE) -C payload/src/gpulab/shaders

.PHONY: native native-arm64 native-sanitize
native native-arm64 native-sanitize: ; @$(MAKE) -C payload/native $@

# The Python linters and ansible-lint at once, each target's output together: on a free
# machine the two take both cores (`make test` queues the two halves apart). The two halves
# rely on lint's prerequisites, or on `make test`'s, which it marks done with -o, so they name
# none of their own.
lint: setup collection
	@$(MAKE) --no-print-directory -j 2 --output-sync=target lint-python lint-ansible

lint-python:
	ruff check payload tests lab molecule scripts
	ruff format --check payload tests lab molecule scripts
	mypy

lint-ansible:
	ansible-lint

# The memory, kernel and graph suites run under the Khronos validation layer with its
# synchronization validation, and any message it reports fails the test (tests/vulkan_validation.py):
# lavapipe forgives missing barriers that NVIDIA and Jetson GPUs do not. Instead of a run without
# it, since the layer costs those suites only about 4 CPU-s (docs/kernels.md). The second run
# goes on when the first fails.
test-payload: setup native
	rc=0; pytest tests/payload tests/native tests/submit tests/fuzz || rc=$$?; \
	GPULAB_VK_VALIDATION=1 pytest tests/memory tests/kernels tests/graph || rc=$$?; exit $$rc

# More random graphs than CI's fixed set (new ones each run; about 10 min per 5000).
fuzz-long: setup native
	GPULAB_FUZZ_EXAMPLES=20000 pytest -q tests/fuzz

test-collection: setup collection
	pytest tests/collection tests/inventory tests/roles tests/cross

# ansible-test sanity on the collection: the tests that run offline (the script lists those skipped).
test-sanity: setup
	bash scripts/ansible-test-sanity.sh

test-molecule: image collection
	bash lab/molecule-test.sh

# The same cluster on Debian 13 (Slurm 24.11): the roles on a second Slurm release.
test-debian13: image-trixie collection
	bash lab/molecule-test.sh --scenario debian13

# Faults on a running cluster: each prints its time to recovery and lost job results.
test-faults: image collection
	bash lab/molecule-test.sh --scenario faults

# An arm64 worker under qemu-user beside an x86_64 one, cross-deployed (slow: emulation).
test-mixed-arch: image image-arm64 collection
	bash lab/molecule-test.sh --scenario mixed-arch

# The path every site takes: the collection's tarball installed with ansible-galaxy and run from a
# folder outside the repository with only an inventory and requirements.yml (molecule/site).
test-site: image collection
	bash lab/molecule-test.sh --scenario site

# Alerts end to end (molecule/monitoring): a controller with Prometheus and Alertmanager and one
# worker whose GPU health check is made to fail; the alert reaches a webhook, then resolves.
test-monitoring: image collection
	bash lab/molecule-test.sh --scenario monitoring

# Configuration changes under running jobs: a reconfigure or restarts, as the role decides.
test-rollout: image collection
	bash lab/molecule-test.sh --scenario rollout

# Debian 12's Slurm asked to jump to Debian 13's: the backup, then the refusal (docs/operations.md).
test-upgrade: image collection
	bash lab/molecule-test.sh --scenario upgrade

# Debian 12 -> 13 node by node, then Slurm 22.05 -> 23.11 -> 24.11 by the roles, jobs running.
# Slurm 23.11 comes from an Ubuntu archive (GPULAB_UBUNTU_MIRROR, or this machine's apt sources).
test-upgrade-path: image collection
	bash lab/molecule-test.sh --scenario upgrade-path

# No way out of the network, a flat local repository the only package source, given through
# gpulab.cluster.apt_sources' variables alone: the roles install from it, a job runs.
test-airgap: image collection
	bash lab/molecule-test.sh --scenario airgap

test-scenarios: test-debian13 test-faults test-mixed-arch test-rollout test-upgrade test-upgrade-path test-airgap

# Every check above, molecule's default scenario beside the others (scripts/test.sh: the
# reasons, the logs in build/test/); the prerequisites they share are built first, once.
test: setup collection image native
	@bash scripts/test.sh

# On this (Debian 12) machine: what scripts/gpu-host/slurm.sh needs on a GPU host without a
# package manager or systemd (docs/hardware.md, "Real Slurm on the H100").
.PHONY: gpu-host-bundle
gpu-host-bundle: setup
	@bash scripts/gpu-host/bundle.sh
