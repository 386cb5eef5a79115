"""Reading indexed documents back: a note's body by lines, sections and parts, a code
file's symbols, and a hit grown to its context."""

# The largest context budget a search may ask for (`--context`, MCP `expand`):
# about 50k tokens, more than most local models take in.
MAX_CONTEXT_CHARS = 200_000
