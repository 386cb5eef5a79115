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

BENCH = /tmp/ragline-bench
HUB = ../shared/data/corpora/obsidian-hub

bench: setup-dev
	rm -rf $(BENCH)/hub-vault $(BENCH)/hub && mkdir -p $(BENCH) && cp -a $(HUB) $(BENCH)/hub-vault
	.venv/bin/python benchmarks/index_throughput.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/query_latency.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/mcp_latency.py --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/freshness.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub
