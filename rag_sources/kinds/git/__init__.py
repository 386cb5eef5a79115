"""A git repository: the files of one ref and its commits."""

# The key of a git source's commit item: ".git" can be no path of a tree, so it never
# names a file. (Here, light to import: search and MCP read it.)
COMMIT_KEY_PREFIX = ".git/commits/"
