# The two commands a newcomer needs (see README.md):
#   make demo   set up, index this repository's docs/ and search them
#   make test   set up with the test tools and run the whole test suite (Python 3.11),
#               then the search/serving/MCP/config tests on Python 3.13
.PHONY: demo test test-py313 check-packaging setup setup-dev lint bench bench-quality bench-scale bench-documents bench-edge bench-git bench-mail-feeds

RAGLINE = .venv/bin/ragline --config demo/ragline.toml

demo: setup
	$(RAGLINE) index
	$(RAGLINE) search "how are BM25 and vector results fused"
	$(RAGLINE) status

test: setup-dev
	.venv/bin/python -m pytest
	$(MAKE) test-py313

# ragline supports Python 3.11-3.13: the query side (config, search, MCP, embedders)
# and the compiled readers (pygit2, the tree-sitter grammars) run on the newest too,
# in .venv-py313 (its indexes are built there as well). That venv has no PyTorch (only a
# multi-GB CUDA build of it is at hand for 3.13 offline): its `torch` tests run on 3.11.
PY313_TESTS = tests/test_config.py tests/test_config_validation.py tests/test_search.py \
	tests/test_fusion.py tests/test_query_safety.py tests/test_mcp_tools.py \
	tests/test_mcp_units.py tests/test_mcp_stdio.py tests/test_mcp_errors.py \
	tests/test_ollama_embedder.py tests/test_embedders.py tests/test_import_rules.py \
	tests/test_git_repository.py tests/test_code_chunker.py tests/test_mail_reader.py \
	tests/test_feeds_reader.py tests/test_kind_filters.py tests/test_new_sources.py \
	tests/test_hostile_feeds.py tests/test_serving_bounds.py tests/test_limits_config.py

test-py313:
	scripts/setup.sh --dev --no-torch --python 3.13
	.venv-py313/bin/python -m pytest -p no:cacheprovider -m "not torch" $(PY313_TESTS)

# The README's install without a clone: `pipx install` and `uv tool install` of this
# repository into throw-away homes, used from another folder (init, index, search).
check-packaging:
	scripts/check_packaging.sh pipx
	scripts/check_packaging.sh uv

setup:
	scripts/setup.sh

setup-dev:
	scripts/setup.sh --dev

lint: setup-dev
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports

BENCH = /tmp/ragline-bench
HUB = ../shared/data/corpora/obsidian-hub

bench: setup-dev
	rm -rf $(BENCH)/hub-vault $(BENCH)/hub && mkdir -p $(BENCH) && cp -a $(HUB) $(BENCH)/hub-vault
	.venv/bin/python benchmarks/index_throughput.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/query_latency.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/mcp_latency.py --data-dir $(BENCH)/hub
	.venv/bin/python benchmarks/freshness.py --vault $(BENCH)/hub-vault --data-dir $(BENCH)/hub

# Retrieval quality (issue 5): index each BEIR set once, then every fusion idea,
# the defaults end to end, other chunk sizes and the ONNX backend against PyTorch.
EVAL = /tmp/ragline-eval
SETS = cranfield:test cisi:test cosqa:dev scifact:train

bench-quality: setup-dev
	for s in $(SETS); do .venv/bin/ragline eval ../shared/data/eval/$${s%%:*} --split $${s##*:} --mode all --data-dir $(EVAL)/$${s%%:*}; done
	for t in 128 256; do printf '[chunking]\ntarget_tokens = %s\n' $$t > /tmp/ragline-chunks-$$t.toml; \
	  for s in cranfield:test scifact:train; do .venv/bin/ragline --config /tmp/ragline-chunks-$$t.toml eval ../shared/data/eval/$${s%%:*} --split $${s##*:} --mode all --data-dir $(EVAL)-t$$t/$${s%%:*}; done; done
	.venv/bin/python benchmarks/fusion_lab.py --eval-root $(EVAL) --chunk-roots 128=$(EVAL)-t128,256=$(EVAL)-t256
	.venv/bin/python benchmarks/fusion_experiments.py --eval-root $(EVAL)
	.venv/bin/python benchmarks/backend_quality.py --onnx-root $(EVAL) --torch-root $(EVAL)-torch

# Query latency at 10k / 100k / 1M chunks, flat and with the automatic indexes.
bench-scale: setup-dev
	.venv/bin/python benchmarks/scale_latency.py --sizes 10000,100000,1000000

# Documents (issue 10): every PDF and EPUB of the corpora indexed from empty; pages/s,
# embedder share, peak memory; OCR seconds per page.
bench-documents: setup-dev
	.venv/bin/python benchmarks/documents_throughput.py

# Edge-case vaults (issue 13): 20,000 tiny files and one 20 MB note; time and peak
# memory against the bare embedder and a bare stat walk.
bench-edge: setup-dev
	.venv/bin/python benchmarks/edge_vaults.py

# git sources: CoSQA as a repository (quality), indexing speed, no-change sensor tick.
bench-git: setup-dev
	.venv/bin/python benchmarks/git_source.py

# Mail (all of corpora/email) and feeds (all of corpora/feeds, served on 127.0.0.1).
bench-mail-feeds: setup-dev
	.venv/bin/python benchmarks/mail_source.py --save
	.venv/bin/python benchmarks/feeds_source.py --save
