"""Typed arguments of the MCP tools that never coerce: a string is no boolean ("yes",
"true", "1" are errors, not true) and no number; bounds stay in the published schema."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, Strict


def _a_number(value: object) -> object:
    """Refuse text and booleans where a number is wanted (pydantic reads "5" as 5 and
    true as 1); whole floats stay accepted, as JSON Schema counts 3.0 an integer."""
    if isinstance(value, str | bool):
        raise ValueError("not a number")
    return value


# Argument types that never coerce: a string is no boolean ("yes", "true", "1" are
# errors, not true) and no number. Bounds go inside, before the validator, so that
# the published schema keeps them as minimum/maximum.
Flag = Annotated[bool, Strict()]


def whole(ge: int | None = None, le: int | None = None) -> Any:
    """An integer argument between ``ge`` and ``le``."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_a_number)]


def number(ge: float | None = None, le: float | None = None) -> Any:
    """A number argument between ``ge`` and ``le``."""
    return Annotated[float, Field(ge=ge, le=le), BeforeValidator(_a_number)]
