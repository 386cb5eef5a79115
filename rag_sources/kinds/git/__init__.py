"""A git repository: the files of one ref and its commits."""
