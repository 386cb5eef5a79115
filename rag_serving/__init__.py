"""Serving side of ragline: the index format, embedders and hybrid search.

This package never imports ``dagster`` or ``rag_assets`` so that search and the
MCP server start fast.
"""
