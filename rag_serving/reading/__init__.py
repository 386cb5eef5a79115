"""Reading indexed documents back: a note's body by lines, sections and parts, a code
file's symbols, and a hit grown to its context."""
