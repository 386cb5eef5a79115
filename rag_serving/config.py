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
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, Union
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rag_serving.index.location import is_remote as is_remote_uri
from rag_sources import detect
from rag_sources.config import FileSourceConfig, Strict, absolute_path, close_hint
from rag_sources.detect import DETECT_MAX_DEPTH, DETECT_MAX_ENTRIES, DETECT_MAX_SECONDS
from rag_sources.errors import ConfigError
from rag_sources.kinds import check_registered_kinds, kind_info, registered_kinds
from rag_sources.limits import Limits

CONFIG_ENV = "RAGLINE_CONFIG"
CONFIG_FILENAME = "ragline.toml"


class SentenceTransformersConfig(Strict):
    """The embedded default: all-MiniLM-L6-v2 (inside the package), or a local
    sentence-transformers folder."""

    provider: Literal["sentence-transformers"] = "sentence-transformers"
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(default=64, ge=1, le=4096)
    # Queries and documents are embedded by ONNX Runtime with a graph built from the
    # model's weights without PyTorch (cached in the data dir by the weights' hash);
    # "torch" embeds with sentence-transformers (the `torch` extra).
    query_backend: Literal["onnx", "torch"] = "onnx"
    document_backend: Literal["onnx", "torch"] = "onnx"
    # Where documents are embedded: "auto" picks ONNX Runtime's CUDA, then CoreML
    # provider when installed (onnxruntime-gpu), else the CPU. Queries use the CPU.
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    # Whether the model was trained on many languages. The bundled MiniLM knows
    # English only: for a query mostly in another script, keyword search leads.
    multilingual: bool = False


class OllamaConfig(Strict):
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
    multilingual: bool = False  # true for bge-m3, multilingual-e5 …: see SentenceTransformersConfig


EmbedderConfig = Annotated[
    SentenceTransformersConfig | OllamaConfig, Field(discriminator="provider")
]


class ChunkingConfig(Strict):
    """How documents are cut into chunks (sizes in the embedder's own tokens)."""

    target_tokens: int = Field(default=180, ge=16)
    max_tokens: int | None = Field(
        default=None, ge=16, description="hard cap; defaults to the embedder's input limit"
    )
    # What leads each chunk's embedded text: its heading path, or the document's title
    # then its heading path (docs/benchmarks.md, contextual_chunks).
    context: Literal["headings", "title"] = "headings"

    @model_validator(mode="after")
    def _target_fits(self) -> ChunkingConfig:
        if self.max_tokens is not None and self.target_tokens > self.max_tokens:
            raise ValueError(
                f"target_tokens ({self.target_tokens}) is above max_tokens "
                f"({self.max_tokens}); lower target_tokens or raise max_tokens"
            )
        return self


class SearchWeights(Strict):
    # Defaults measured with `ragline eval` (docs/benchmarks.md, fusion_experiments).
    bm25: float = Field(default=0.3, ge=0)
    vector: float = Field(default=1.0, ge=0)


class RerankConfig(Strict):
    """A second stage that re-scores the top fused hits (rag_serving/search/rerank.py).

    ``provider = "cross-encoder"`` loads a local model folder (``model`` is its path);
    ``provider = "http"`` posts to a Jina/Cohere-style ``/v1/rerank`` endpoint at ``url``
    (llama.cpp ``llama-server --reranking``, vLLM, LocalAI, Infinity); ``provider =
    "ollama"`` asks a Qwen3-Reranker-style model at ``host`` for yes/no log-probabilities
    through ``/api/generate`` (Ollama has no rerank API; logprobs need Ollama >= 0.12.11).
    """

    enabled: bool = False  # rerank every search (the CLI's --rerank / MCP's `rerank` per call)
    provider: Literal["cross-encoder", "http", "ollama"] = "cross-encoder"
    model: str | None = None
    url: str = "http://127.0.0.1:8080/v1/rerank"
    host: str = "http://127.0.0.1:11434"
    top_n: int = Field(default=30, ge=1, le=1000)
    timeout_s: float = Field(default=30.0, gt=0)


class FeedbackConfig(Strict):
    """Query-vector feedback in hybrid search (rag_serving/search/feedback.py): the
    query vector moves toward its ``top`` best fused hits (``weight``: how far), the
    vector list's candidates are re-scored with it and the lists fused again."""

    enabled: bool = True
    top: int = Field(default=3, ge=1, le=50)
    weight: float = Field(default=0.3, ge=0, le=10)
    temperature: float = Field(default=1.0, gt=0, le=100)


class CodeRankingConfig(Strict):
    """Ranking for indexes that hold code (rag_serving/search/code_ranking.py); a no-op
    on an index without code. Measured: benchmarks/code_search.py."""

    # An identifier or a "where / how is …" question lifts code, a "when / why did …
    # change" one history (commits), by ``prefer`` spreads of the candidates' scores.
    intent: bool = True
    prefer: float = Field(default=2.0, ge=0, le=10)
    # A test file's chunks go down by ``tests`` spreads unless the query speaks of tests.
    tests_below: bool = True
    tests: float = Field(default=2.0, ge=0, le=10)
    # A hit in a chunk of several definitions reports the matching one's lines.
    symbol_lines: bool = True
    # How many of the best fused hits are re-ordered (their rows are read).
    window: int = Field(default=50, ge=1, le=1000)


class LinksConfig(Strict):
    """The link prior in hybrid search (rag_serving/search/links.py): after fusion a
    hit's score is multiplied by ``1 + backlinks · ln(1 + b) + linked · ln(1 + c)``,
    ``b`` the documents linking to it, ``c`` those among the ``top`` best fused ones."""

    # Off: it wins on the Obsidian Hub's link set but costs the help vault's heading and
    # fragment searches (docs/benchmarks.md, "link_prior", "link_prior_help").
    enabled: bool = False
    backlinks: float = Field(default=0.4, ge=0, le=10)
    linked: float = Field(default=0.4, ge=0, le=10)
    top: int = Field(default=20, ge=1, le=200)


class SearchConfig(Strict):
    """Defaults for ``hybrid_search`` and the CLI."""

    k: int = Field(default=10, ge=1, le=1000)
    mode: Literal["hybrid", "bm25", "vector"] = "hybrid"
    fusion: Literal["zscore", "convex", "rrf"] = "zscore"
    rrf_k: int = Field(default=60, ge=1)
    candidates: int = Field(default=200, ge=1, le=10000)
    # One hit per document, its best chunk (`--all-sections` / MCP `collapse=false`
    # per search: every matching chunk).
    collapse: bool = True
    weights: SearchWeights = SearchWeights()
    rerank: RerankConfig = RerankConfig()
    feedback: FeedbackConfig = FeedbackConfig()
    code: CodeRankingConfig = CodeRankingConfig()
    links: LinksConfig = LinksConfig()


# Cron fields as Dagster reads them (its vendored croniter): ranges, names, the
# special forms it accepts; tests/test_config_validation.py checks agreement.
_CRON_ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                      "nov", "dec")),
    ("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)  # fmt: skip


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a five-field cron schedule Dagster accepts; None if it is."""
    text = expression.strip()
    if text.lower() in _CRON_ALIASES:
        return None
    fields = text.split()
    if len(fields) != 5:
        return f"it has {len(fields)} fields, not 5"
    for field, (label, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in field.split(","):
            problem = _cron_item_problem(item, label, low, high, names)
            if problem:
                return problem
    month, day = fields[3].lower(), fields[2]
    if month in {"2", "feb"} and day in {"30", "31"}:
        return f"February has no day {day}"
    return None


def _cron_item_problem(
    item: str, label: str, low: int, high: int, names: tuple[str, ...]
) -> str | None:
    def value(token: str) -> int | None:
        if token.lower() in names:
            return names.index(token.lower()) + (1 if label == "month" else 0)
        return int(token) if token.isdigit() else None

    if label == "day-of-week" and "#" in item:
        day, _, nth = item.partition("#")
        if value(day) is None or not nth.isdigit() or not 1 <= int(nth) <= 5:
            return f"{item!r} is not a valid {label} (N#K: weekday N, K-th of the month, K 1-5)"
        item = day
    base, slash, step = item.partition("/")
    if slash and not (step.isdigit() and int(step) > 0):
        return f"{item!r}: the step after '/' must be a whole number above 0"
    if base == "*" or (base == "?" and label in {"day-of-month", "day-of-week"}):
        return None
    if base in {"L", "l"} and label == "day-of-month" and not slash:
        return None
    for token in base.split("-", 1):
        if not token:
            return f"{item!r} is not a valid {label} ({low}-{high})"
        number = value(token)
        if number is None or not low <= number <= high:
            return f"{token!r} is not a valid {label} ({low}-{high})"
    return None


class FreshnessConfig(Strict):
    """How the Dagster sensors and schedules keep the index fresh."""

    sensor_interval_s: int = Field(default=30, ge=5, le=86400)
    reconcile_cron: str = "0 3 * * *"
    maintenance_cron: str = "30 3 * * *"
    timezone: str = "UTC"
    # LanceDB versions older than this are removed by maintenance.
    keep_versions_hours: float = Field(default=24.0, ge=0)

    @field_validator("reconcile_cron", "maintenance_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        problem = cron_problem(value)
        if problem:
            raise ValueError(
                f"{value!r} is not a cron schedule: {problem} (five fields: minute hour "
                'day-of-month month day-of-week, e.g. "0 3 * * *" for 03:00 every day)'
            )
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        if value in {"UTC", "utc"}:
            return value
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {value!r}{close_hint(value, available_timezones())} "
                '(an IANA name such as "Europe/Berlin" or "UTC")'
            ) from None
        return value


class McpToken(Strict):
    """A bearer token for the HTTP MCP server, mapped to a user and their sources."""

    user: str
    token: str | None = Field(default=None, min_length=16)
    token_env: str | None = None
    sources: list[str] = ["*"]
    # May this token write: `remember` a note, `clip` a page (into the configured folders).
    write: bool = False

    @model_validator(mode="after")
    def _one_secret(self) -> McpToken:
        if (self.token is None) == (self.token_env is None):
            raise ValueError("give exactly one of `token` or `token_env`")
        return self

    def secret(self) -> str | None:
        """The token value (read from the environment for ``token_env``)."""
        return self.token if self.token is not None else os.environ.get(self.token_env or "")


class McpConfig(Strict):
    """The MCP server (``ragline mcp``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    tokens: list[McpToken] = []
    # The stdio server (one local client, the user's own): may it `remember` and `clip`?
    stdio_write: bool = False
    # Offer the `ask` tool (an answer from the [llm] model, with checked citations).
    ask_tool: bool = False


def _inside_folder(value: str) -> str:
    """A folder given relative to a source's root, never leaving it."""
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts or value.startswith("~"):
        raise ValueError(f"{value!r} must be a folder inside the source (relative, no '..')")
    return value


class LlmConfig(Strict):
    """The local language model `ragline ask` and auto-tagging talk to (Ollama)."""

    provider: Literal["ollama"] = "ollama"
    host: str = "http://127.0.0.1:11434"
    # None: `ask` and auto-tags say how to set one up (e.g. "qwen2.5:7b-instruct").
    model: str | None = None
    connect_timeout_s: float = Field(default=3.0, gt=0)
    # Longest wait for the next piece of an answer (a model loading counts).
    read_timeout_s: float = Field(default=120.0, gt=0)
    # Longest a whole answer may take.
    total_timeout_s: float = Field(default=600.0, gt=0)
    temperature: float = Field(default=0.1, ge=0, le=2)
    # The model's context window in tokens (Ollama's num_ctx).
    context_tokens: int = Field(default=8192, ge=512)


class ClipConfig(Strict):
    """Where `ragline clip` and the MCP `clip` tool archive pages: a folder inside a
    configured markdown source (``<folder>/<YYYY-MM>/<slug>.md``)."""

    source: str | None = None
    folder: str = "clippings"
    # Ask the [llm] model for tags (preferring those already in the index).
    auto_tags: bool = False
    timeout_s: float = Field(default=20.0, gt=0)
    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    # Hosts on this machine or a private network that the MCP `clip` tool may fetch
    # (an agent's URLs are limited to public addresses otherwise).
    allow_hosts: list[str] = []

    @field_validator("folder")
    @classmethod
    def _folder_inside(cls, value: str) -> str:
        return _inside_folder(value)


class RememberConfig(Strict):
    """Where the MCP `remember` tool saves an agent's notes: a folder inside a
    configured markdown source."""

    source: str | None = None
    folder: str = "inbox"

    @field_validator("folder")
    @classmethod
    def _folder_inside(cls, value: str) -> str:
        return _inside_folder(value)


# Dagster's Postgres storage speaks psycopg2: a bare `postgresql://` would make
# SQLAlchemy pick psycopg 3, which dagster-postgres does not install.
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg2")
DEFAULT_POSTGRES_URL_ENV = "RAGLINE_DAGSTER_POSTGRES_URL"
DEFAULT_CELERY_BROKER_URL_ENV = "RAGLINE_CELERY_BROKER_URL"
CELERY_SCHEMES = ("redis", "rediss", "amqp", "amqps", "pyamqp", "sqs")


class DagsterConfig(Strict):
    """Where the Dagster instance keeps runs, events, schedules and the run queue:
    SQLite files under ``DAGSTER_HOME`` (one host), or a Postgres database that every
    host running ragline's Dagster (UI, daemon, ``ragline index``/``watch``, workers)
    shares; where runs execute their steps, and how many run at once."""

    storage: Literal["sqlite", "postgres"] = "sqlite"
    # the database URL: read from this environment variable (it may hold a password)...
    postgres_url_env: str = Field(default=DEFAULT_POSTGRES_URL_ENV, pattern=r"^[A-Za-z_]\w*$")
    # ...unless given here (without a password: use ~/.pgpass or the variable for one)
    postgres_url: str | None = None
    # Where a run's steps execute: in the run's own process (the default), each in a
    # process of its own, or on Celery workers (`ragline worker`) anywhere.
    executor: Literal["in_process", "multiprocess", "celery"] = "in_process"
    # Runs (sources) indexed at once, by the run queue and by `ragline index`.
    max_concurrent_runs: int = Field(default=1, ge=1, le=64)
    # Steps one source's embedding is split into when steps run apart (multiprocess,
    # celery), each with at least `embedding_step_min_chunks` chunks to embed.
    embedding_steps: int = Field(default=4, ge=1, le=64)
    embedding_step_min_chunks: int = Field(default=2048, ge=1)
    # The Celery broker (and result backend) URL, read from this variable.
    celery_broker_url_env: str = Field(
        default=DEFAULT_CELERY_BROKER_URL_ENV, pattern=r"^[A-Za-z_]\w*$"
    )

    @model_validator(mode="after")
    def _celery_needs_postgres(self) -> DagsterConfig:
        if self.executor == "celery" and self.storage != "postgres":
            raise ValueError(
                'executor = "celery" needs storage = "postgres": workers record their '
                "steps in the instance every host shares"
            )
        return self

    @field_validator("postgres_url")
    @classmethod
    def _postgres_scheme(cls, value: str | None) -> str | None:
        if value is not None:
            postgres_url_problem(value, "dagster.postgres_url")
        return value

    def where(self) -> str:
        """Where runs are kept, for messages (never the URL)."""
        if self.storage != "postgres":
            return "SQLite files under DAGSTER_HOME"
        if self.postgres_url:
            return "Postgres ([dagster] postgres_url)"
        return f"Postgres (${self.postgres_url_env})"

    def storage_url(self) -> str | None:
        """The Postgres URL for dagster-postgres (``postgresql+psycopg2://…``), None for
        SQLite; raises ConfigError when it is not set or not a Postgres URL."""
        if self.storage != "postgres":
            return None
        url = self.postgres_url or os.environ.get(self.postgres_url_env, "").strip()
        if not url:
            raise ConfigError(
                f'[dagster] storage = "postgres" needs the database URL: set '
                f"${self.postgres_url_env} (postgresql://user:password@host:5432/dagster) "
                "or [dagster] postgres_url"
            )
        where = "dagster.postgres_url" if self.postgres_url else f"${self.postgres_url_env}"
        try:
            postgres_url_problem(url, where)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return "postgresql+psycopg2://" + url.split("://", 1)[1]

    def broker_url(self) -> str:
        """The Celery broker URL (``executor = "celery"``); ConfigError when unset or
        not a broker URL (never echoing it: it may hold a password)."""
        url = os.environ.get(self.celery_broker_url_env, "").strip()
        if not url:
            raise ConfigError(
                f'[dagster] executor = "celery" needs the broker URL: set '
                f"${self.celery_broker_url_env} (e.g. redis://host:6379/0)"
            )
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in CELERY_SCHEMES:
            shown = f"'{scheme}://…'" if scheme else "no scheme"
            raise ConfigError(
                f"${self.celery_broker_url_env} must be a Celery broker URL "
                f"({', '.join(s + '://' for s in CELERY_SCHEMES)}), got {shown}"
            )
        return url


def postgres_url_problem(url: str, where: str) -> None:
    """Raise ValueError naming ``where`` when ``url`` is no Postgres URL psycopg2 takes
    (never echoing the URL: it may hold a password)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in POSTGRES_SCHEMES:
        shown = f"'{scheme}://…'" if scheme else "no scheme"
        raise ValueError(
            f"{where} must be a postgresql:// URL (dagster-postgres uses psycopg2), got {shown}"
        )


# Languages keyword search can stem (Tantivy's Snowball stemmers), by ISO 639-1 code;
# "none" indexes words unstemmed.
# Every registered kind's model (the built-in kinds and those of installed packages),
# told apart by `kind`.
SourceConfig = Annotated[
    Union[tuple(info.config for info in registered_kinds().values())],  # noqa: UP007
    Field(discriminator="kind"),
]
SOURCE_KINDS = tuple(registered_kinds())
EMBEDDER_PROVIDERS = ("sentence-transformers", "ollama")
DEFAULT_PROVIDER = "sentence-transformers"


class RaglineConfig(Strict):
    """The whole configuration file."""

    data_dir: Path = Path(".ragline")
    # Where the LanceDB tables live (None: <data_dir>/lancedb): a folder, s3://bucket/prefix
    # or s3+ddb://bucket/prefix?ddbTableName=TABLE; Tantivy, models, Dagster stay local.
    index_uri: str | None = None
    # On an s3:// store that ignores conditional writes: write anyway (one writer only).
    allow_unsafe_concurrent_writes: bool = False
    embedder: EmbedderConfig = SentenceTransformersConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    search: SearchConfig = SearchConfig()
    freshness: FreshnessConfig = FreshnessConfig()
    mcp: McpConfig = McpConfig()
    llm: LlmConfig = LlmConfig()
    clip: ClipConfig = ClipConfig()
    remember: RememberConfig = RememberConfig()
    limits: Limits = Limits()
    dagster: DagsterConfig = DagsterConfig()
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

    @field_validator("index_uri")
    @classmethod
    def _index_uri(cls, value: str | None) -> str | None:
        from rag_serving.index.location import index_uri_problem

        if value is None:
            return None
        value = value.strip()
        problem = index_uri_problem(value) if value else "it is empty; leave it out for the default"
        if problem:
            raise ValueError(f"{value!r}: {problem}")
        return value

    @property
    def remote_index(self) -> bool:
        """Whether the LanceDB tables live on object storage (``index_uri``)."""
        from rag_serving.index.location import is_remote

        return is_remote(self.index_uri)

    @model_validator(mode="before")
    @classmethod
    def _default_provider(cls, data: Any) -> Any:
        # `[embedder]` without `provider` means the documented default, so that
        # `model = "..."` alone works (pydantic's discriminator would need the tag).
        if isinstance(data, dict) and isinstance(data.get("embedder"), dict):
            embedder = data["embedder"]
            if "provider" not in embedder:
                data = {**data, "embedder": {"provider": DEFAULT_PROVIDER, **embedder}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _inherit_limits(cls, data: Any) -> Any:
        # A source's `[sources.limits]` overrides single keys of `[limits]`.
        if not isinstance(data, dict) or not isinstance(data.get("limits"), dict):
            return data
        # Only known keys are passed down: a wrong one is reported once, at `[limits]`.
        shared = {k: v for k, v in data["limits"].items() if k in Limits.model_fields}
        sources = data.get("sources")
        if not isinstance(sources, list):
            return data
        merged = [
            {**source, "limits": {**shared, **(source.get("limits") or {})}}
            if isinstance(source, dict) and isinstance(source.get("limits", {}), dict)
            else source
            for source in sources
        ]
        return {**data, "sources": merged}

    @model_validator(mode="after")
    def _token_sources(self) -> RaglineConfig:
        names = [s.name for s in self.sources]
        for index, token in enumerate(self.mcp.tokens):
            for name in token.sources:
                if name != "*" and name not in names:
                    raise ValueError(
                        f"mcp.tokens[{index}].sources: user {token.user!r} is given unknown source "
                        f"{name!r}{close_hint(name, names)} (configured: "
                        f"{', '.join(names) or 'none'}; '*' for all)"
                    )
        return self

    def source(self, name: str) -> FileSourceConfig:
        """The source called ``name``; raises ConfigError listing close matches."""
        for source in self.sources:
            if source.name == name:
                return source
        from rag_sources.suggest import did_you_mean

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
    check_registered_kinds()
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
        loc = tuple(error["loc"])
        key = _dotted(loc, raw)
        kind = error["type"]
        message = error["msg"].removeprefix("Value error, ")
        ctx = error.get("ctx", {})
        value = error.get("input")
        shown = f" (got {value!r})" if _is_scalar(value) else ""
        if kind == "union_tag_invalid":
            tag = str(ctx.get("discriminator", "")).strip("'")
            known = SOURCE_KINDS if tag == "kind" else EMBEDDER_PROVIDERS
            key, shown = f"{key}.{tag}", ""
            message = f"unknown {tag} {ctx.get('tag')!r}; supported: {', '.join(known)}"
        elif kind == "union_tag_not_found" and loc[:1] == ("sources",):
            name = value.get("name") if isinstance(value, dict) else None
            who = f"source {name!r}" if isinstance(name, str) else key
            key, shown = f"{key}.kind", ""
            choices = ", ".join(f'"{k}"' for k in SOURCE_KINDS[:-1]) + f' or "{SOURCE_KINDS[-1]}"'
            message = f"{who} has no `kind`; add kind = {choices}"
        elif kind == "extra_forbidden":
            message = "unknown key" + _unknown_key_hint(loc)
            shown = ""
        elif kind == "missing":
            message, shown = "required key is missing", ""
        elif kind in {"list_type"} and loc == ("sources",):
            message = "write each source as a [[sources]] block (double brackets)"
            shown = ""
        elif kind in {"model_type", "model_attributes_type", "dict_type"}:
            message, shown = f"must be a table ([{key}] or {key} = {{ ... }})", ""
        elif loc == ():
            # A check across keys: its message starts with the key it is about.
            key, _, message = message.partition(": ")
        if shown and repr(value) in message:
            shown = ""
        lines.append(f"{path}: {key}: {message}{shown}")
    return "\n".join(lines)


def _unknown_key_hint(loc: tuple) -> str:
    """'; did you mean ...?' from the keys allowed where the unknown key was found,
    or the variant (provider, kind) that has the key."""
    found = _model_at(loc[:-1])
    name = str(loc[-1])
    if found is None:
        return " (check the spelling; see docs/configuration.md)"
    model, siblings = found
    allowed = [f for f in model.model_fields if f != "config_path"]
    for sibling in siblings:
        tag, tag_value = _tag_of(sibling)
        if name in sibling.model_fields and name not in allowed:
            this = _tag_of(model)[1]
            return (
                f' for {tag} "{this}"; it is a key of {tag} = "{tag_value}" '
                f'(set {tag} = "{tag_value}" to use it)'
            )
    suggestion = close_hint(name, allowed, limit=1)
    return suggestion or f"; allowed here: {', '.join(allowed)}"


def _model_at(loc: tuple) -> tuple[type[BaseModel], list[type[BaseModel]]] | None:
    """The model class at a validation-error location, and its variants (the other
    members of a tagged union) when it was chosen by a tag."""
    current: Any = RaglineConfig
    siblings: list[type[BaseModel]] = []
    for item in loc:
        current = _strip(current)
        members = _union_models(current)
        if isinstance(item, int):
            args = typing.get_args(current)
            if typing.get_origin(current) is not list or not args:
                return None
            current = args[0]
        elif members:
            chosen = [m for m in members if _tag_of(m)[1] == item]
            if not chosen:
                return None
            current, siblings = chosen[0], [m for m in members if m is not chosen[0]]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(item))
            if field is None:
                return None
            current, siblings = field.annotation, []
        else:
            return None
    current = _strip(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current, siblings
    members = _union_models(current)
    return (members[0], members[1:]) if members else None


def _strip(annotation: Any) -> Any:
    """``X`` from ``Annotated[X, ...]`` and ``X | None``."""
    while True:
        if typing.get_origin(annotation) is Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if _is_union(annotation) and len(args) == 1:
            annotation = args[0]
            continue
        return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in {typing.Union, types.UnionType}


def _union_models(annotation: Any) -> list[type[BaseModel]]:
    if not _is_union(annotation):
        return []
    return [
        a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)
    ]


def _tag_of(model: type[BaseModel]) -> tuple[str, str | None]:
    """(discriminator key, its value) of a union member: ``kind`` or ``provider``."""
    for tag in ("kind", "provider"):
        field = model.model_fields.get(tag)
        if field is not None:
            values = typing.get_args(field.annotation)
            return tag, values[0] if values else None
    return "", None


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


def data_dir_problems(config: RaglineConfig, writable: bool = True) -> list[str]:
    """Why ``data_dir`` cannot hold an index (a file, or a folder that cannot be
    created or written), one line each naming the config file; empty when usable.
    ``writable=False``: only what also stops reading it (a file in its place)."""
    where = f"{config.config_path}: data_dir"
    data_dir = config.data_dir
    if data_dir.exists() and not data_dir.is_dir():
        return [f"{where}: {data_dir} is a file, not a folder; point data_dir at a folder"]
    existing = data_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return [f"{where}: cannot create {data_dir}: {existing} is a file, not a folder"]
    if not writable:
        return []
    if not os.access(existing, os.W_OK | os.X_OK):
        return [f"{where}: cannot write to {existing}; choose another data_dir or make it writable"]
    return []


def source_path_problems(config: RaglineConfig, names: Iterable[str] | None = None) -> list[str]:
    """Why a source's ``path`` cannot be indexed (missing, a file, unreadable), one
    line per source (of ``names``, or all) naming the config file and the key."""
    wanted = None if names is None else set(names)
    lines = []
    for index, source in enumerate(config.sources):
        if wanted is not None and source.name not in wanted:
            continue

        def where(key: str, index: int = index, name: str = source.name) -> str:
            return f"{config.config_path}: sources[{index}].{key}: source {name!r}"

        lines += source.path_problems(where)
    return lines


def require_usable(config: RaglineConfig, sources: Iterable[str] | None = None) -> None:
    """Raise one ConfigError listing every problem of ``data_dir`` and of the paths of
    ``sources`` (None: every source): the checks that need the file system, run by
    the commands that write the index or watch the sources."""
    lines = data_dir_problems(config) + source_path_problems(config, sources)
    if lines:
        raise ConfigError("\n".join(lines))


def _resolve_paths(config: RaglineConfig, path: Path) -> RaglineConfig:
    base = path.parent
    data_dir = config.data_dir.expanduser()
    sources = [s.with_absolute_paths(base) for s in config.sources]
    embedder = config.embedder
    if isinstance(embedder, SentenceTransformersConfig):
        # A local model folder, like every path in the file, is relative to the file.
        model = Path(embedder.model).expanduser()
        if embedder.model.startswith(("~", ".")) or model.is_absolute() or (base / model).is_dir():
            resolved = str(absolute_path(model, base))
            embedder = embedder.model_copy(update={"model": resolved})
    index_uri = config.index_uri
    if index_uri and not is_remote_uri(index_uri):  # a folder, relative to the file
        index_uri = str(absolute_path(Path(index_uri).expanduser(), base))
    return config.model_copy(
        update={
            "data_dir": absolute_path(data_dir, base),
            "index_uri": index_uri,
            "embedder": embedder,
            "search": _resolve_rerank_model(config.search, base),
            "sources": sources,
            "config_path": path,
        }
    )


def _resolve_rerank_model(search: SearchConfig, base: Path) -> SearchConfig:
    """A cross-encoder's model folder, like every path in the file, relative to it."""
    rerank = search.rerank
    if rerank.provider != "cross-encoder" or not rerank.model:
        return search
    model = Path(rerank.model).expanduser()
    if not (rerank.model.startswith(("~", ".")) or model.is_absolute() or (base / model).is_dir()):
        return search  # a name, not a folder: the reranker says it is not found
    resolved = rerank.model_copy(update={"model": str(absolute_path(model, base))})
    return search.model_copy(update={"rerank": resolved})


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


def detect_kind(
    folder: Path,
    max_entries: int = DETECT_MAX_ENTRIES,
    max_depth: int = DETECT_MAX_DEPTH,
    max_seconds: float = DETECT_MAX_SECONDS,
) -> tuple[str, str]:
    """The source kind for ``folder`` and why, as the registered kinds recognise it
    (``rag_sources.detect``): a git repository, a Calibre library, mail, a Markdown
    vault, and anything else a folder of documents."""
    models = [info.config for info in registered_kinds().values()]
    return detect.detect_kind(folder, models, max_entries, max_depth, max_seconds)


def new_source_target(target: str, kind: str | None) -> tuple[str, str, str]:
    """What ``ragline init`` / ``sources add`` were given: (kind, why, the path or URL).

    A folder is detected by ``detect_kind``; a URL or a file by the kind that
    recognises it (a feed's URL or file, an OPML file, an mbox). Raises ``ConfigError``
    naming what to give."""
    models = [info.config for info in registered_kinds().values()]
    if re.match(r"^https?://", target, re.IGNORECASE):
        found = detect.detect_target(target, None, models)
        if kind:
            return kind, "given with --kind", target
        if found is None:
            raise ConfigError(f"{target}: no source kind reads a URL; give --kind")
        return found[0], found[1], target
    path = Path(target).expanduser().resolve()
    if path.is_dir():
        chosen, why = (kind, "given with --kind") if kind else detect_kind(path)
        return chosen, why, str(path)
    if not path.is_file():
        raise ConfigError(
            f"{path}: not a folder, a file or an http(s) URL; give the folder of your notes, "
            "documents or mail, an mbox or OPML file, or a feed's URL"
        )
    if kind:
        return kind, "given with --kind", str(path)
    found = detect.detect_target(str(path), path, models)
    if found is None:
        raise ConfigError(
            f"{path}: a file, not a folder; give the folder that holds it (or an mbox, OPML or "
            "feed file, or name the kind with --kind)"
        )
    return found[0], found[1], str(path)


def source_block(name: str, kind: str, source_path: Path | str) -> str:
    """The ``[[sources]]`` block of a new source, in the config file's TOML."""
    text = source_path.as_posix() if isinstance(source_path, Path) else source_path
    path = text.replace("\\", "\\\\").replace('"', '\\"')
    return kind_info(kind).config.source_block(name, path)


def starter_config(source_path: Path | str, data_dir: Path, name: str, kind: str) -> str:
    """Text of a starter config with one source of ``kind`` for ``source_path``."""
    return STARTER_CONFIG.format(data_dir=data_dir.as_posix()) + source_block(
        name, kind, source_path
    )


def slugify(text: str) -> str:
    """Turn a folder name into a valid source name."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return (slug or "notes")[:63]


def source_name(target: str) -> str:
    """A source name for a folder, a file (without its suffix) or a URL (its host)."""
    from urllib.parse import urlsplit

    if "://" in target:
        return slugify(urlsplit(target).hostname or "web")
    path = Path(target)
    return slugify(path.stem if path.is_file() else path.name)
