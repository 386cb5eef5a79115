"""The indexing stages as plain functions; the Dagster assets are thin wrappers."""
