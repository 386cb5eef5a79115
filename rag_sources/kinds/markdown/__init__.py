"""Markdown notes, e.g. an Obsidian vault, with their attachments."""
