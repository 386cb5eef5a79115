"""The Dagster code location of ragline: partitioned indexing assets."""
