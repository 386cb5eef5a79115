"""Clipping a web page or a PDF into a folder of Markdown notes: the download (over
``rag_sources.net``'s guarded fetch, or a bounded read of a local file), what is
extracted from it (main text, title, author, dates, canonical URL) and the note it
becomes (``<folder>/<YYYY-MM>/<slug>.md`` with frontmatter, never overwriting)."""
