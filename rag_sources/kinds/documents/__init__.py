"""A folder of documents: PDF, office files, HTML, EPUB, text, images."""
