"""Why a file of a repository's tree is not indexed: by its path, or by its content.

Each rule returns a one-line reason that users see (``ragline status``, the
problems table), or ``None`` when the file is indexed. The patterns are data
(the tables below), drawn from GitHub linguist's ``vendor.yml`` and
``generated.rb`` but narrower: linguist hides whole folders such as ``tools/``,
``dist/`` or ``deps/`` from language statistics, which for a search index would
drop code people write. Only folders that are third-party by convention are
skipped as vendored.

``.gitattributes`` can say it better than any pattern: ``PathAttributes`` (read by
``GitRepository.attributes``) marks a path ``linguist-vendored``,
``linguist-generated`` or ``binary``; an explicit ``-linguist-vendored`` or
``linguist-generated=false`` turns the matching rules off for that path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from rag_sources.scanning import is_valid_text

# Folders whose files are third-party code (any path component, exact case).
VENDORED_FOLDERS: frozenset[str] = frozenset(
    {
        "node_modules",
        "bower_components",
        "jspm_packages",
        "vendor",
        "Vendor",
        "vendors",
        "third_party",
        "third-party",
        "thirdparty",
        "ThirdParty",
        "3rdparty",
        "3rd_party",
        "3rd-party",
        "Pods",  # CocoaPods
        "Carthage",
        "Godeps",
        "site-packages",
        "dist-packages",
        ".venv",
        ".yarn",  # Yarn's cache, releases and plug-ins
    }
)

# Lock files and other files that tools write, by exact file name.
GENERATED_NAMES: dict[str, str] = {
    name: "lock file"
    for name in (
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "bun.lockb",
        "Cargo.lock",
        "poetry.lock",
        "Pipfile.lock",
        "pdm.lock",
        "uv.lock",
        "conda-lock.yml",
        "composer.lock",
        "Gemfile.lock",
        "go.sum",
        "Gopkg.lock",
        "glide.lock",
        "mix.lock",
        "pubspec.lock",
        "Podfile.lock",
        "Package.resolved",
        "flake.lock",
        ".terraform.lock.hcl",
        "packages.lock.json",
        "gradle.lockfile",
    )
}
GENERATED_NAMES.update(
    {".pnp.cjs": "Yarn Plug'n'Play loader", ".pnp.js": "Yarn Plug'n'Play loader"}
)

# Generated files by the end of their name (lower-cased).
GENERATED_SUFFIXES: tuple[tuple[str, str], ...] = (
    (".min.js", "minified"),
    ("-min.js", "minified"),
    (".min.css", "minified"),
    ("-min.css", "minified"),
    (".min.mjs", "minified"),
    (".map", "source map"),
    ("_pb2.py", "protocol buffers output"),
    ("_pb2.pyi", "protocol buffers output"),
    ("_pb2_grpc.py", "protocol buffers output"),
    (".pb.go", "protocol buffers output"),
    (".pb.cc", "protocol buffers output"),
    (".pb.h", "protocol buffers output"),
    (".pb.swift", "protocol buffers output"),
    ("_pb.js", "protocol buffers output"),
    ("_pb.d.ts", "protocol buffers output"),
    (".g.dart", "Dart code generation output"),
    (".freezed.dart", "Dart code generation output"),
    (".designer.cs", "Visual Studio designer output"),
    (".designer.vb", "Visual Studio designer output"),
    (".feature.cs", "SpecFlow output"),
)

# Binary files by extension (lower-cased, without the dot): what kind of file it is.
BINARY_EXTENSIONS: dict[str, str] = {}
for _kind, _exts in (
    ("image", "png jpg jpeg gif bmp ico icns tif tiff webp psd heic heif avif xcf cr2 nef dng"),
    ("audio", "mp3 wav flac ogg oga m4a aac wma aif aiff opus mid midi"),
    ("video", "mp4 m4v mov avi mkv webm wmv flv mpg mpeg 3gp"),
    (
        "archive",
        "zip tar gz tgz bz2 xz zst lz lz4 lzma 7z rar jar war ear aar whl egg apk ipa dmg "
        "iso img deb rpm cab msi",
    ),
    ("font", "ttf otf woff woff2 eot ttc"),
    ("executable or object code", "exe dll so dylib a lib o obj ko bin class pyc pyo pyd wasm dex"),
    (
        "binary data",
        "sqlite sqlite3 db mdb accdb parquet feather arrow avro orc npy npz pkl pickle h5 "
        "hdf5 pt pth onnx safetensors ckpt tflite pb",
    ),
):
    BINARY_EXTENSIONS.update(dict.fromkeys(_exts.split(), _kind))

# Documents that the `documents` kind reads (PDF, office files, EPUB).
DOCUMENT_EXTENSIONS: dict[str, str] = {
    "pdf": "PDF",
    "doc": "Word",
    "docx": "Word",
    "odt": "OpenDocument",
    "ppt": "PowerPoint",
    "pptx": "PowerPoint",
    "odp": "OpenDocument",
    "xls": "Excel",
    "xlsx": "Excel",
    "ods": "OpenDocument",
    "epub": "EPUB",
}

# Prose: long lines are paragraphs there, and a mention of a marker is not a marker.
PROSE_EXTENSIONS: frozenset[str] = frozenset(
    {
        "md",
        "markdown",
        "mdx",
        "txt",
        "text",
        "rst",
        "adoc",
        "asciidoc",
        "org",
        "tex",
        "textile",
        "wiki",
    }
)

BINARY_SNIFF_BYTES = 8000  # as git: a NUL byte in the first 8,000 bytes means binary
MINIFIED_MIN_BYTES = 2048  # a short one-liner is not worth calling minified
MINIFIED_MEAN_LINE = 300  # characters per non-empty line, on average
MINIFIED_LONGEST_LINE = 5000  # one line this long in a file of few lines
MINIFIED_FEW_LINES = 10
MARKER_LINES = 40  # generated markers are looked for in this many first lines
MARKER_BYTES = 8192

# Comment openers: a marker counts only on a comment line (not in code or strings).
_COMMENT = re.compile(r"^\s*(//|#|/\*|\*|--|<!--|;|%|\(\*|\{-|'|\"\"\"|''')")
# Written so that this file's own lines never match them.
_MARKERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"Code generated .* DO NOT EDIT"),
    re.compile("@" + r"generated\b"),
    re.compile("<" + r"auto-generated"),
    re.compile(
        r"(?i)(auto-?generated|generated (by|from|with|automatically)|machine[- ]generated|"
        r"this file (is|was|has been) generated).{0,80}do not (edit|modify)"
    ),
    re.compile(
        r"(?i)do not (edit|modify).{0,80}(auto-?generated|generated (by|from|automatically))"
    ),
    re.compile(r"Generated by the protocol buffer compiler"),
    re.compile(r"Autogenerated by Thrift"),
    re.compile(r"Generated by Cython"),
)


@dataclass(frozen=True)
class PathAttributes:
    """What ``.gitattributes`` says of a path: True set, False unset, None unspecified."""

    vendored: bool | None = None  # linguist-vendored
    generated: bool | None = None  # linguist-generated
    binary: bool | None = None  # binary (or -diff)


NO_ATTRIBUTES = PathAttributes()

SUBMODULE_REASON = (
    "a git submodule (another repository); add that repository as a git source of its own "
    "to index it"
)
LINK_REASON = "a symbolic link; the file it points to is indexed under its own path"
UNDECODABLE_REASON = "file name is not valid UTF-8; rename it"


def entry_type_skip_reason(entry_type: str) -> str | None:
    """Why a tree entry of this type (``TreeEntry.type``) is not indexed, or None for a blob."""
    if entry_type == "submodule":
        return SUBMODULE_REASON
    if entry_type == "link":
        return LINK_REASON
    return None


def _extension(name: str) -> str:
    return name.rpartition(".")[2].lower() if "." in name.lstrip(".") else ""


def path_skip_reason(
    path: str, size: int | None, max_bytes: int, attributes: PathAttributes = NO_ATTRIBUTES
) -> str | None:
    """Why the file at ``path`` (``size`` bytes) is not indexed, decided without
    reading it; None when it may be indexed.

    Checked in this order: a name that is not UTF-8 (decoded with surrogate escapes
    by ``GitRepository``), vendored folders, generated and lock files, binary and
    document extensions, then the size cap ``max_bytes`` (config ``max_file_bytes``).
    """
    if not is_valid_text(path):
        return UNDECODABLE_REASON
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    lower = name.lower()
    if attributes.vendored:
        return "vendored code (.gitattributes: linguist-vendored)"
    if attributes.vendored is None:
        for part in parts[:-1]:
            if part in VENDORED_FOLDERS:
                return f"vendored code (under {part}/)"
    if attributes.generated:
        return "generated file (.gitattributes: linguist-generated)"
    if attributes.generated is None:
        kind = GENERATED_NAMES.get(name)
        if kind is None:
            kind = next((k for suffix, k in GENERATED_SUFFIXES if lower.endswith(suffix)), None)
        if kind is not None:
            return f"generated file ({kind})"
    ext = _extension(name)
    if ext in DOCUMENT_EXTENSIONS:
        return (
            f"a {DOCUMENT_EXTENSIONS[ext]} document; index documents with a `documents` source "
            "on the same folder"
        )
    if ext in BINARY_EXTENSIONS:
        return f"binary file ({BINARY_EXTENSIONS[ext]}, .{ext})"
    if attributes.binary:
        return "binary file (.gitattributes: binary)"
    if size is not None and size > max_bytes:
        return (
            f"larger than max_file_bytes ({size:,} > {max_bytes:,} bytes); raise "
            "max_file_bytes in the source's config to index it"
        )
    return None


def content_skip_reason(
    path: str, data: bytes, attributes: PathAttributes = NO_ATTRIBUTES
) -> str | None:
    """Why the file at ``path`` whose content is ``data`` is not indexed, or None:
    binary content (a NUL byte in the first 8,000 bytes), minified code (very long
    lines), or a generated-code marker on a comment line near the top. Prose files
    (Markdown, text, reStructuredText...) are only checked for binary content."""
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return "binary content (NUL bytes in the first 8,000 bytes)"
    if attributes.generated is False or _extension(path.rpartition("/")[2]) in PROSE_EXTENSIONS:
        return None
    minified = _minified(data)
    if minified:
        return minified
    return _generated_marker(data)


def _minified(data: bytes) -> str | None:
    if len(data) < MINIFIED_MIN_BYTES:
        return None
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        return None
    mean = sum(map(len, lines)) / len(lines)
    longest = max(map(len, lines))
    if mean > MINIFIED_MEAN_LINE or (
        longest > MINIFIED_LONGEST_LINE and len(lines) <= MINIFIED_FEW_LINES
    ):
        return (
            f"minified or machine-written code ({len(lines):,} lines averaging "
            f"{mean:,.0f} characters, the longest {longest:,})"
        )
    return None


def _generated_marker(data: bytes) -> str | None:
    head = data[:MARKER_BYTES].decode("utf-8", "replace")
    for number, line in enumerate(head.splitlines()[:MARKER_LINES], start=1):
        if _COMMENT.match(line) and any(marker.search(line) for marker in _MARKERS):
            text = line.strip()
            if len(text) > 80:
                text = text[:79] + "…"
            return f"generated file (marked on line {number}: {text!r})"
    return None
