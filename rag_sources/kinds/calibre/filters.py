"""The Calibre kind's search filter: a book's series."""

from rag_sources.filters import FacetFilter

SERIES = FacetFilter(
    name="series",
    option="--series",
    facets=("series",),
    help="Only books in this series (repeatable).",
    description="Only books in these series.",
    unknown="no indexed book is in series",
    singular="series",
    indexed="series",
)
