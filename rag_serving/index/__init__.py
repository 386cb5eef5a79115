"""The on-disk index: LanceDB tables (the source of truth) and a Tantivy index."""
