"""A Calibre library: each book's metadata and the text of one of its formats."""
