"""Keys of a git source's items that are not files."""

# The key of a git source's commit item: ".git" can be no path of a tree, so it never
# names a file.
COMMIT_KEY_PREFIX = ".git/commits/"
