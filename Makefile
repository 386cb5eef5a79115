# The two commands a newcomer needs (see README.md):
#   make demo   set up, index this repository's docs/ and search them
#   make test   set up with the test tools and run the whole test suite
.PHONY: demo test setup setup-dev lint bench

RAGLINE = .venv/bin/ragline --config demo/ragline.toml

demo: setup
	$(RAGLINE) index
	$(RAGLINE) search "how are BM25 and vector results fused"
	$(RAGLINE) status

test: setup-dev
	.venv/bin/python -m pytest

setup:
	scripts/setup.sh

setup-dev:
	scripts/setup.sh --dev

lint: setup-dev
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

bench: setup-dev
	.venv/bin/python benchmarks/index_throughput.py --data-dir /tmp/ragline-bench/hub
	.venv/bin/python benchmarks/query_latency.py --data-dir /tmp/ragline-bench/hub
