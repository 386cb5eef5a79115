"""Which code language a file is, and the tree-sitter parser for it.

Grammars come from the per-language wheels (``tree_sitter_python`` ...), imported
only when a file of that language is parsed; the ``Language`` objects are cached per
process and the ``Parser`` objects per thread (a parser is not safe to share).
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
import time
from pathlib import PurePosixPath

from tree_sitter import Language, Parser, Tree

__all__ = ["CODE_LANGUAGES", "PARSE_TIMEOUT_S", "language_for", "parse"]

log = logging.getLogger(__name__)

# language -> (grammar module, factory function)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "php": ("tree_sitter_php", "language_php"),
    "swift": ("tree_sitter_swift", "language"),
    "scala": ("tree_sitter_scala", "language"),
    "bash": ("tree_sitter_bash", "language"),
}

CODE_LANGUAGES: frozenset[str] = frozenset(_GRAMMARS)

_EXTENSIONS: dict[str, str] = {
    **dict.fromkeys([".py", ".pyi", ".pyw"], "python"),
    **dict.fromkeys([".js", ".mjs", ".cjs", ".jsx"], "javascript"),
    **dict.fromkeys([".ts", ".mts", ".cts"], "typescript"),
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    **dict.fromkeys([".kt", ".kts"], "kotlin"),
    **dict.fromkeys([".c", ".h"], "c"),
    **dict.fromkeys(
        [".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".ipp", ".inl", ".tpp"],
        "cpp",
    ),
    **dict.fromkeys([".cs", ".csx"], "csharp"),
    **dict.fromkeys([".rb", ".rake", ".gemspec", ".ru", ".rbw"], "ruby"),
    **dict.fromkeys([".php", ".phtml", ".php3", ".php4", ".php5", ".php7", ".phps"], "php"),
    ".swift": "swift",
    **dict.fromkeys([".scala", ".sc"], "scala"),
    **dict.fromkeys([".sh", ".bash", ".zsh", ".ksh"], "bash"),
}

_FILENAMES: dict[str, str] = {
    **dict.fromkeys(
        [
            "Rakefile", "Gemfile", "Guardfile", "Podfile", "Vagrantfile", "Brewfile",
            "Capfile", "Berksfile", "Fastfile", "Appfile", "Dangerfile", "Thorfile",
            ".irbrc", ".pryrc",
        ],
        "ruby",
    ),
    **dict.fromkeys(
        [
            ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases",
            ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
            ".kshrc", "PKGBUILD", "APKBUILD",
        ],
        "bash",
    ),
    **dict.fromkeys(["SConstruct", "SConscript", "wscript"], "python"),
}  # fmt: skip

# interpreter named on a shebang line -> language
_INTERPRETERS: dict[str, str] = {
    **dict.fromkeys(["python", "pypy", "jython"], "python"),
    **dict.fromkeys(["node", "nodejs", "bun"], "javascript"),
    **dict.fromkeys(["deno", "ts-node", "tsx"], "typescript"),
    **dict.fromkeys(["bash", "sh", "zsh", "ksh", "dash", "ash", "mksh"], "bash"),
    **dict.fromkeys(["ruby", "jruby"], "ruby"),
    "php": "php",
    "swift": "swift",
    "scala": "scala",
    "kotlin": "kotlin",
}
_VERSION_SUFFIX = re.compile(r"[\d.]+$")

# A parse stops after this long (plus PARSE_S_PER_MB per megabyte) so that a
# pathological input cannot hang a run; the file then falls back to line windows.
PARSE_TIMEOUT_S = 2.0
PARSE_S_PER_MB = 2.0


def language_for(path: str, head: str | None = None) -> str | None:
    """The code language of a file by its name (extension, or names like ``Rakefile``,
    ``Gemfile``, ``.bashrc``), else by a shebang in ``head`` (its first line: python,
    node, bash/sh, ruby, php ...); None if it is not code this package chunks."""
    name = PurePosixPath(path.replace("\\", "/")).name
    if name in _FILENAMES:
        return _FILENAMES[name]
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in _EXTENSIONS and name != suffix:  # ".sh" alone is a dot file, not a script
        return _EXTENSIONS[suffix]
    if head:
        return _shebang_language(head.split("\n", 1)[0])
    return None


def _shebang_language(line: str) -> str | None:
    if not line.startswith("#!"):
        return None
    words = line[2:].split()
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    if program == "env":  # "#!/usr/bin/env -S python3 -u": skip env's options and VAR=value
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not rest:
            return None
        program = rest[0].rsplit("/", 1)[-1]
    program = _VERSION_SUFFIX.sub("", program) or program
    return _INTERPRETERS.get(program)


_LANGUAGE_CACHE: dict[str, Language] = {}
_LANGUAGE_LOCK = threading.Lock()
_LOCAL = threading.local()


def _language(language: str) -> Language:
    with _LANGUAGE_LOCK:
        if language not in _LANGUAGE_CACHE:
            module_name, factory = _GRAMMARS[language]
            module = importlib.import_module(module_name)
            _LANGUAGE_CACHE[language] = Language(getattr(module, factory)())
        return _LANGUAGE_CACHE[language]


def _parser(language: str) -> Parser:
    parsers: dict[str, Parser] | None = getattr(_LOCAL, "parsers", None)
    if parsers is None:
        parsers = _LOCAL.parsers = {}
    if language not in parsers:
        parsers[language] = Parser(_language(language))
    return parsers[language]


def parse(source: bytes, language: str, timeout_s: float | None = None) -> Tree | None:
    """The syntax tree of ``source``; None when the grammar cannot be loaded or the
    parse runs past its time limit (``PARSE_TIMEOUT_S`` + ``PARSE_S_PER_MB`` per MB)."""
    try:
        parser = _parser(language)
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        log.warning("no tree-sitter grammar for %s (%s); using line windows", language, exc)
        return None
    if timeout_s is None:
        timeout_s = PARSE_TIMEOUT_S + PARSE_S_PER_MB * len(source) / 1_000_000
    deadline = time.monotonic() + timeout_s
    view = memoryview(source)

    def read(offset: int, _point: object) -> memoryview:
        return view[offset : offset + 65536]

    def past_deadline(_offset: int, _has_error: bool) -> bool:
        return time.monotonic() > deadline

    try:
        # the progress callback (our timeout) only works when reading through a callback
        return parser.parse(read, progress_callback=past_deadline)
    except ValueError:  # "Parsing failed": cancelled at the deadline
        parser.reset()
        return None
