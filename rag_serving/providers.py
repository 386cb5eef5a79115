"""A registry of plugin providers by name (``module:Class`` targets, imported on
first use): the shape embedders and rerankers share."""

from __future__ import annotations

import importlib

from rag_sources.errors import ConfigError


class ProviderRegistry:
    """Provider name → ``module:Class``; ``load`` imports the class when asked."""

    def __init__(self, what: str, targets: dict[str, str]):
        self.what = what  # "embedder", "reranker": for messages
        self._targets = dict(targets)

    def register(self, name: str, target: str) -> None:
        """Register ``module:Class`` as the implementation of provider ``name``."""
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def load(self, name: str) -> type:
        """The class of provider ``name`` (ConfigError naming the known ones)."""
        target = self._targets.get(name)
        if target is None:
            raise ConfigError(
                f"unknown {self.what} provider {name!r}; available: {', '.join(self.names())}"
            )
        module_name, class_name = target.split(":")
        return getattr(importlib.import_module(module_name), class_name)
