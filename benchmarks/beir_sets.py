"""The BEIR sets of ../shared/data/eval that issue 5 measures, their splits, the
issue's nDCG@10 targets and its anchors (measured on this machine, same model)."""

SETS = {"cranfield": "test", "cisi": "test", "cosqa": "dev", "scifact": "train"}
TARGETS = {
    "scifact": 0.73,
    "cranfield": 0.44,
    "cisi": 0.45,
    "cosqa": 0.62,
}  # issue 14 (issue 5: 0.72 / 0.43 / 0.45 / 0.61)
ANCHORS = {  # plain Tantivy BM25 / exact MiniLM cosine / RRF k=60 equal
    "scifact": (0.677, 0.660, 0.710), "cranfield": (0.371, 0.382, 0.413),
    "cisi": (0.310, 0.419, 0.404), "cosqa": (0.383, 0.603, 0.532),
}  # fmt: skip
