"""Calibre libraries (``kind = "calibre"``): reading ``metadata.db`` read-only and
listing one item per book (``library``), and the ``SourceKind`` (``kind``).
``ragline status`` lists a library's books without the indexing side."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.calibre.config import CalibreSourceConfig
from rag_sources.kinds.calibre.filters import SERIES

KIND = KindInfo(
    CalibreSourceConfig, "rag_sources.kinds.calibre.kind:CalibreKind", filters=(SERIES,)
)
