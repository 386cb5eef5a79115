"""Calibre libraries (``kind = "calibre"``): reading ``metadata.db`` read-only and
listing one item per book (``library``). No Dagster and no ``rag_assets`` here:
``ragline status`` lists a library's books without the indexing side."""
