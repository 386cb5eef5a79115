"""The ``ragline`` command line."""
