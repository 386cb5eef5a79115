"""Names of file types: what people call a type (``--type markdown``) and the type
the format parsers give it (``md``)."""

# Other names people use for a file type (``--type markdown`` is ``md``).
TYPE_ALIASES = {
    "markdown": "md",
    "jpeg": "jpg",
    "tif": "tiff",
    "htm": "html",
    "xhtml": "html",
    "yml": "yaml",
    "text": "txt",
    "log": "txt",
    "tsv": "csv",
    "xlsm": "xlsx",
}
