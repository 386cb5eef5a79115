"""``[limits]``: the caps on one item, set for every source and per source, validated
like the rest of the config, and handed to the parsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_assets.sources import source_kind
from rag_serving.config import parse_config_file
from rag_sources.errors import ConfigError
from rag_sources.limits import Limits

SOURCES = """
[[sources]]
name = "notes"
kind = "markdown"
path = "vault"

[[sources]]
name = "papers"
kind = "documents"
path = "vault"
[sources.limits]
max_image_pixels = 4000000
"""


def _config(tmp_path: Path, text: str) -> Path:
    (tmp_path / "vault").mkdir(exist_ok=True)
    path = tmp_path / "ragline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_source_takes_the_shared_limits_and_its_own_overrides(tmp_path: Path) -> None:
    config = parse_config_file(
        _config(
            tmp_path, "[limits]\nmax_nesting_depth = 64\nmax_image_pixels = 9000000\n" + SOURCES
        )
    )
    notes, papers = config.sources
    assert config.limits.max_nesting_depth == 64
    assert (notes.limits.max_nesting_depth, notes.limits.max_image_pixels) == (64, 9_000_000)
    assert (papers.limits.max_nesting_depth, papers.limits.max_image_pixels) == (64, 4_000_000)
    assert notes.limits.max_heading_chars == Limits().max_heading_chars


def test_the_parsers_get_the_sources_limits(tmp_path: Path) -> None:
    config = parse_config_file(_config(tmp_path, "[limits]\nmax_sheet_rows = 7\n" + SOURCES))
    options = source_kind(config.sources[1]).parse_options(allow_deferred_work=True)
    assert options.limits.max_image_pixels == 4_000_000
    assert options.max_rows_per_sheet == 7 == options.limits.max_sheet_rows
    assert options.max_chars == options.limits.max_document_chars


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[limits]\nmax_image_pixel = 5\n" + SOURCES, "max_image_pixel"),
        ("[limits]\nmax_image_pixels = 5\n" + SOURCES, "max_image_pixels"),
    ],
)
def test_a_wrong_limit_is_a_config_error_naming_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config_file(_config(tmp_path, text))
    assert named in str(error.value)
    assert str(tmp_path / "ragline.toml") in str(error.value)
