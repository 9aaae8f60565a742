# The README's two commands: `make demo` and `make test`.
# Both create .venv when it is missing. torch is installed first, pinned, so
# pip takes the CPU build (on a GPU machine, see README "Installing").

VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: demo demo-checks test lint dryrun pytest clean-demo shadow shadow-ci

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# The demo ends with its HTML report (every table and figure with its caption and provenance).
demo: $(STAMP)
	$(BIN)/snakemake all --configfile config/demo.yaml
	$(BIN)/snakemake --report results/report.html --configfile config/demo.yaml
	@echo "The demo's report: $(CURDIR)/results/report.html"

# Known-truth checks on the demo's own results (tests/demo): the trained zoo recovers the generators' effects.
demo-checks: $(STAMP)
	UNSURE_DEMO_RESULTS=results $(BIN)/pytest tests/demo

# The paper config's shadow (config/config.yaml + config/shadow.yaml) on tiny models of the
# same families, in .shadow/paper (shadow-ci: the CI variant, entries of one size family folded).
shadow: $(STAMP)
	$(PY) tools/shadow.py

shadow-ci: $(STAMP)
	$(PY) tools/shadow.py --ci

lint: $(STAMP)
	$(BIN)/ruff check lib scripts tests bench tools
	$(BIN)/ruff format --check lib scripts tests bench tools
	$(BIN)/mypy
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint
	$(BIN)/snakemake --lint --configfile config/demo.yaml

dryrun: $(STAMP)
	$(BIN)/snakemake -n --quiet rules all
	$(BIN)/snakemake -n --quiet rules all --configfile config/demo.yaml

pytest: $(STAMP)
	$(BIN)/pytest

# The demo first: pytest then checks its results (tests/demo) and writes its report
# (tests/test_report.py) instead of building another demo. The SLURM tests wait on the
# cluster's polling far more than they compute, so they run beside the demo (their output
# follows it). The other tests wait on processes too: they run two at a time (pytest-xdist),
# except those that keep every core busy (marker whole_machine), which run alone after them.
test: lint dryrun $(STAMP)
	@slurm_log=$$(mktemp); \
	$(BIN)/pytest -m slurm -p no:cacheprovider --basetemp=$$(mktemp -d) > $$slurm_log 2>&1 & slurm=$$!; \
	$(MAKE) --no-print-directory demo; demo=$$?; \
	wait $$slurm; slurm_status=$$?; \
	echo "--- the SLURM tests, run beside the demo:"; cat $$slurm_log; rm -f $$slurm_log; \
	test $$demo -eq 0 && test $$slurm_status -eq 0
	UNSURE_DEMO_RESULTS=results $(BIN)/pytest -n 2 -m "not slurm and not whole_machine"
	UNSURE_DEMO_RESULTS=results $(BIN)/pytest -m whole_machine
