"""Fetching over HTTP under one set of safety rules (feeds, clipped pages): timeouts
and one deadline, caps on the body and on what it decompresses to, and redirects or
DNS answers that may not lead into a more private network than the address asked for."""
