"""A Claude Code plugin for ragline: the MCP server entry and a skill that tells the
agent when to search ragline (and when to `remember`).

The layout follows Claude Code's plugin reference
(https://code.claude.com/docs/en/plugins-reference): ``.claude-plugin/plugin.json``
(the manifest; ``name`` is required), ``.mcp.json`` at the plugin root
(``{"mcpServers": {...}}``), and ``skills/<name>/SKILL.md`` with YAML frontmatter
whose ``name`` (lowercase letters, digits and hyphens, at most 64, the folder's name)
and ``description`` (at most 1024 characters: what the skill does and when to use it)
are required (https://agentskills.io/specification). The same folder is also a
one-plugin marketplace (``.claude-plugin/marketplace.json`` with ``"source": "./"``,
https://code.claude.com/docs/en/plugins/create-marketplace), so that
``/plugin marketplace add DIR`` and ``/plugin install ragline@ragline-local`` work
as well as ``claude --plugin-dir DIR``.

The skill says when and why; the tools' own descriptions stay the only list of their
arguments. ``integrations/claude-code/ragline/`` in the repository is this plugin
with a portable server entry (``ragline mcp``, the config found as the CLI finds it);
``ragline mcp-config --plugin DIR`` writes it with the user's own config path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_sources.errors import ConfigError

PLUGIN_NAME = "ragline"
SKILL_NAME = "ragline"
MARKETPLACE_NAME = "ragline-local"
DESCRIPTION = (
    "Search your own notes, documents, code, mail and feeds indexed by ragline, and "
    "save notes back to your vault."
)
# The server entry of the checked-in plugin: `ragline` on PATH, its default config.
PORTABLE_SERVER = {"command": "ragline", "args": ["mcp"]}

SKILL_DESCRIPTION = (
    "Search the user's own knowledge index (Markdown notes and Obsidian vaults, PDFs "
    "and office documents, e-books, git repositories with their commits, mail, feeds) "
    "through the ragline MCP tools, and save notes back with `remember`. Use it before "
    "grepping a repository or the disk for something the user wrote, read or received, "
    "before guessing about their notes, documents, mail or past decisions, and when "
    "they ask you to remember or note something."
)

SKILL_BODY = """\
# ragline: the user's own knowledge index

ragline indexes what the user keeps: notes, documents, books, code repositories and
their history, mail and feeds. Its MCP server (named `ragline`) offers `search`,
`open`, `neighbors`, `list_sources`, `status`, `reindex` and, where the user allows
it, `remember`. Each tool's description lists its arguments; this skill says when to
reach for which.

## Search before you grep or guess

- When a question touches something the user wrote, read, received or decided
  ("what did we decide about…", "where are my notes on…", "that paper about…",
  "the mail from…"), call `search` first: before grepping or globbing a repository
  or the file system, and before answering from memory. One search ranks by meaning
  and by words across every source; reading twenty files does not.
- For code in an indexed repository, `search` finds functions and classes by what
  they do, and the commits that changed them. Grep stays right for an exact
  identifier in the working tree you are editing.
- Not sure what is indexed? Call `list_sources` once.
- Nothing relevant? Say what you searched (query and filters) and fall back to the
  files. `status` shows sources that failed or have changes not indexed yet.

## Narrow with filters, not with more words

- Keep the `query` to what you look for; put constraints in the filters the tool
  offers: a source or kind of source, a file type, a path prefix, tags, a date range
  (`after`/`before` compare each item's own date), a language or symbol for code, an
  author, sender, recipient or mail folder.
- An unknown filter value is an error that lists close matches: correct it and
  search again rather than dropping the filter.

## Read around a hit

- Snippets are short. Where `search` offers `expand`, use it to get each hit grown to
  its section (heading, page, function, message) within a character budget, instead
  of a second round trip.
- Otherwise `open` a hit: by `chunk_id` for its section, page, slide, function or
  message; by `doc_id` for the whole document; with a `section` for one heading.
- `neighbors` follows a note's [[links]] and backlinks, a code file's symbols and the
  commits that changed it, a message's thread and attachments.
- Cite what you use by the hit's `location` (`paper.pdf#page=6`,
  `src/app.py#L10-L42`, `Note.md#Heading`) so that the user can open the place.
- A hit marked `stale` changed on disk since it was indexed: `open` it, or
  `reindex` its source when `status` shows pending changes.

## Remember what is worth keeping

- Call `remember` when the user asks you to remember, note or keep something, and
  offer it at the end of work whose result they will want again: a decision and its
  reasons, a summary of what you read, an answer you had to piece together.
- Write the body in your own words, in Markdown; pass the `doc_id`s or `chunk_id`s
  you relied on as links (they become links the user can follow); add a few tags of
  the kind the user already uses.
- One note per topic. `remember` never edits or overwrites a note: a second call
  makes a second note. Never save secrets, or anything the user did not want kept.
- If `remember` answers that it is not permitted or not configured, tell the user the
  setting it names; do not retry.
"""


def skill_text() -> str:
    """The skill's SKILL.md: frontmatter, then the instructions."""
    front = json.dumps  # a JSON string is a valid YAML scalar: quotes and colons are safe
    return (
        f"---\nname: {SKILL_NAME}\ndescription: {front(SKILL_DESCRIPTION, ensure_ascii=False)}\n"
        f"---\n\n{SKILL_BODY}"
    )


def plugin_files(server_name: str, server: dict[str, Any]) -> dict[str, str]:
    """The plugin's files (relative path → text) with ``server`` as its MCP entry."""
    manifest = {
        "name": PLUGIN_NAME,
        "description": DESCRIPTION,
        "keywords": ["search", "notes", "obsidian", "mcp", "rag"],
    }
    marketplace = {
        "name": MARKETPLACE_NAME,
        "owner": {"name": "ragline"},
        "plugins": [{"name": PLUGIN_NAME, "source": "./", "description": DESCRIPTION}],
    }
    return {
        ".claude-plugin/plugin.json": _json(manifest),
        ".claude-plugin/marketplace.json": _json(marketplace),
        ".mcp.json": _json({"mcpServers": {server_name: server}}),
        f"skills/{SKILL_NAME}/SKILL.md": skill_text(),
    }


def write_plugin(directory: Path, server_name: str, server: dict[str, Any]) -> list[Path]:
    """Write the plugin into ``directory`` (new, empty, or an earlier ragline plugin,
    whose files are replaced); returns the files written."""
    manifest = directory / ".claude-plugin" / "plugin.json"
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory} is a file; give a folder for the plugin")
    if directory.is_dir() and any(directory.iterdir()) and not _is_ours(manifest):
        raise ConfigError(
            f"{directory} is not empty and holds no ragline plugin; give a new or empty folder"
        )
    written = []
    for relative, text in plugin_files(server_name, server).items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _is_ours(manifest: Path) -> bool:
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("name") == PLUGIN_NAME
    except (OSError, ValueError, AttributeError):
        return False


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
