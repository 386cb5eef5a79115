"""Mail: mbox files, Maildirs, .eml and .emlx files."""
