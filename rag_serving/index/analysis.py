"""How text is cut into terms for keyword search, in every script.

Words of scripts written with spaces (Latin, Cyrillic, Greek, Arabic, Devanagari…)
are terms, combining marks included (Devanagari vowel signs, Arabic harakat), so a
Hindi word stays one term. Scripts written without spaces (Han, Hiragana, Katakana,
Hangul, Thai, Lao, Khmer, Myanmar) are indexed one character per term, with
positions; a query's run of such characters is searched as overlapping two-character
phrases (character bigrams) that are ORed, so any substring of two or more characters
matches and a chunk holding the whole run ranks first.

Latin-script text is stemmed for its language: each Latin language has its own
Tantivy field (``text`` for English, ``text_fr`` …), and a chunk's text goes into
exactly one of them, chosen by the source's ``language`` or detected per chunk
(py3langid). The other scripts' Snowball stemmers (Russian, Greek, Tamil)
touch only their own letters, so every field chains them all.

Text and queries are first brought to Unicode compatibility form (NFKC,
``fold_compatibility``): Arabic presentation forms, ligatures (ﬁ), full-width
letters, circled and superscript digits are searched as the plain characters people
type. The chunks keep their text as written; Tantivy holds (and snippets show) the
folded text.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache
from typing import Any

import tantivy

# Scripts whose words are not separated by spaces: one term per character.
_NOSPACE = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
TOKEN_PATTERN = rf"[{_NOSPACE}]|[[\p{{L}}\p{{N}}\p{{M}}]--[{_NOSPACE}]]+"
# The same classes for Python's ``re`` (which has no \p): the ranges of those scripts.
_NOSPACE_RANGES = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff\u19e0-\u19ff"  # Khmer
    "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7ff"  # Hangul
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b"  # radicals, 々〆〇
    "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # Hiragana, Katakana (half-width too)
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\U00020000-\U0003134f"  # Han extensions
)
NOSPACE_RUN = re.compile(f"[{_NOSPACE_RANGES}]+")
# Punctuation between two such characters (、。「」…) is not a term boundary for
# bigrams: the characters are neighbours in the text field too (punctuation makes no
# term), so "て、末" matches the bigram て末 on both sides.
_PUNCTUATION_BETWEEN = re.compile(
    f"(?<=[{_NOSPACE_RANGES}])"
    "[\u2010-\u205e\u3000-\u3004\u3008-\u3020\u3030\u303d\u30fb"
    "\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]+"
    f"(?=[{_NOSPACE_RANGES}])"
)
_LETTER = re.compile(r"[^\W\d_]")
_LATIN_LETTER = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")

# Bytes: Tantivy drops longer terms (a 14-letter Devanagari word is 42 bytes).
MAX_TERM_BYTES = 120

# Latin-script languages with a Snowball stemmer in Tantivy, by ISO 639-1 code.
LATIN_STEMMERS = {
    "en": "english", "da": "danish", "de": "german", "es": "spanish", "fi": "finnish",
    "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian",
    "pt": "portuguese", "ro": "romanian", "sv": "swedish", "tr": "turkish",
}  # fmt: skip
# Stemmers of other scripts: each changes only words in its own script. Not Arabic:
# Snowball's Arabic stemmer folds rare words into common stems (known-item MRR@10
# 0.995 without it, 0.951 with it; benchmarks.md multilingual_known_item).
SCRIPT_STEMMERS = ("russian", "greek", "tamil")

DEFAULT_TEXT_FIELD = "text"  # English, and every non-Latin script
UNSTEMMED_TEXT_FIELD = "text_none"
TEXT_FIELDS = (
    DEFAULT_TEXT_FIELD,
    UNSTEMMED_TEXT_FIELD,
    *(f"text_{code}" for code in LATIN_STEMMERS if code != "en"),
)
# Analyzer names registered on every index.
WORDS_ANALYZER = "ragline_words"  # unstemmed: paths, tags
_MIN_DETECT_LETTERS = 40
_MIN_DETECT_CONFIDENCE = 0.9


def fold_compatibility(text: str) -> str:
    """``text`` in Unicode's compatibility form (NFKC): what is indexed and searched."""
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def _analyzer(latin_stemmer: str | None) -> tantivy.TextAnalyzer:
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_TERM_BYTES))
        .filter(tantivy.Filter.lowercase())
    )
    if latin_stemmer is not None:
        builder = builder.filter(tantivy.Filter.stemmer(latin_stemmer))
        for stemmer in SCRIPT_STEMMERS:
            builder = builder.filter(tantivy.Filter.stemmer(stemmer))
    # After stemming: the Snowball stemmers of French, German… expect their accents.
    return builder.filter(tantivy.Filter.ascii_fold()).build()


def field_analyzer_name(field: str) -> str:
    return f"ragline_{field}"


def register_analyzers(index: tantivy.Index) -> None:
    """Register ragline's analyzers on ``index`` (Tantivy does not store them)."""
    index.register_tokenizer(WORDS_ANALYZER, _analyzer(None))
    for field in TEXT_FIELDS:
        index.register_tokenizer(field_analyzer_name(field), _analyzer(_stemmer_of(field)))


def _stemmer_of(field: str) -> str | None:
    if field == UNSTEMMED_TEXT_FIELD:
        return None
    code = "en" if field == DEFAULT_TEXT_FIELD else field.removeprefix("text_")
    return LATIN_STEMMERS[code]


def text_field_for(language: str) -> str | None:
    """The field a configured ``language`` puts text in; None for "auto" (detect)."""
    if language == "auto":
        return None
    if language == "none":
        return UNSTEMMED_TEXT_FIELD
    if language in LATIN_STEMMERS and language != "en":
        return f"text_{language}"
    return DEFAULT_TEXT_FIELD


def detect_text_field(text: str) -> str:
    """The field for ``text`` when its language is detected: a Latin-script text in a
    language other than English, when py3langid is confident, gets that language's
    field; everything else (English, short or mixed text, other scripts) the default."""
    sample = text[:2000]
    letters = len(_LETTER.findall(sample))
    if letters < _MIN_DETECT_LETTERS:
        return DEFAULT_TEXT_FIELD
    if len(_LATIN_LETTER.findall(sample)) * 2 < letters:
        return DEFAULT_TEXT_FIELD  # mostly another script: handled by the script's rules
    code, confidence = _identifier().classify(sample)
    if code == "en" or confidence < _MIN_DETECT_CONFIDENCE:
        return DEFAULT_TEXT_FIELD
    return f"text_{code}"


@cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_modelpath(MODEL_DIR / MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LATIN_STEMMERS))
    return identifier


# A chunk's runs of those scripts are also indexed as their bigrams in this field
# (whitespace-separated): BM25 then weighs a bigram by how rare the bigram is, where a
# two-character phrase over single characters gets the sum of the characters' weights
# (common kana and the particles の, は would count as much as a rare compound).
BIGRAM_FIELD = "text_bigrams"
BIGRAM_PHRASE_BOOST = 1.0


def bigrams_of(text: str) -> str:
    """The bigrams of ``text``'s runs of scripts without spaces, space-separated."""
    joined = _PUNCTUATION_BETWEEN.sub("", text)
    return " ".join(
        run[i : i + 2]
        for run in (m.group(0).lower() for m in NOSPACE_RUN.finditer(joined))
        for i in range(len(run) - 1)
    )


def bigram_query_text(text: str, snippets: bool = False) -> str:
    """``text`` with each unquoted run of two or more characters of a script without
    spaces rewritten as the bigram field's terms, the run as a phrase of them (an
    exact substring scores above scattered bigrams: Japanese known-item MRR@10 0.973
    → 1.0) and two-character phrases on the title ("機械学習" → ``text_bigrams:機械 …
    text_bigrams:"機械 械学 学習" title:"機械" …``); for ``snippets``, as
    overlapping two-character phrases on the default fields instead (which the
    highlighter marks in the text). Quoted phrases and runs after ``field:`` stay as
    typed. Measured: the phrases' weight in the text (the characters' summed IDF)
    only blurred the bigrams' (multilingual_known_item)."""
    rewrite = _snippet_bigrams if snippets else _bigrams
    parts = text.split('"')
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        parts[i] = NOSPACE_RUN.sub(rewrite, _PUNCTUATION_BETWEEN.sub("", parts[i]))
    return '"'.join(parts)


def _pieces(match: re.Match[str]) -> list[str] | None:
    run = match.group(0)
    start = match.start()
    if len(run) < 2 or (start > 0 and match.string[start - 1] == ":"):
        return None
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _bigrams(match: re.Match[str]) -> str:
    pieces = _pieces(match)
    if pieces is None:
        return match.group(0)
    terms = " ".join(f"{BIGRAM_FIELD}:{piece.lower()}" for piece in pieces)
    titles = " ".join(f'title:"{piece}"' for piece in pieces)
    if len(pieces) < 2:
        return f" {terms} {titles} "
    # The run itself, as consecutive bigrams: a chunk holding the exact substring
    # scores above one holding its bigrams scattered.
    run = " ".join(piece.lower() for piece in pieces)
    return f' {terms} {BIGRAM_FIELD}:"{run}"^{BIGRAM_PHRASE_BOOST} {titles} '


def _snippet_bigrams(match: re.Match[str]) -> str:
    pieces = _pieces(match)
    if pieces is None:
        return match.group(0)
    return " " + " ".join(f'"{piece}"' for piece in pieces) + " "


def analyze(text: str, field: str = DEFAULT_TEXT_FIELD) -> list[str]:
    """The terms ``field``'s analyzer makes of ``text`` (for tests and `--explain`)."""
    stemmer = _stemmer_of(field) if field in TEXT_FIELDS else None
    return list(_analyzer(stemmer).analyze(fold_compatibility(text)))


# Stop-word lists (Tantivy's) of each text field's language, for snippets: they mark
# the words that carry a query, not its "the" and "of". Cyrillic stop words cannot be
# mistaken for Latin words, so every field has Russian's too; fields of languages
# without a list, and "none", mark every word.
_STOP_LISTS = {
    "da": "danish", "de": "german", "en": "english", "es": "spanish", "fi": "finnish",
    "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian",
    "pt": "portuguese", "sv": "swedish",
}  # fmt: skip


def stop_words_of(field: str) -> tuple[str, ...]:
    """The stop-word lists (Tantivy language names) that apply to ``field``."""
    if field == UNSTEMMED_TEXT_FIELD or field not in TEXT_FIELDS:
        return ()
    code = "en" if field == DEFAULT_TEXT_FIELD else field.removeprefix("text_")
    own = _STOP_LISTS.get(code)
    return (own, "russian") if own else ("russian",)


@cache
def _stop_filter(language: str) -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword(language))
        .build()
    )


@lru_cache(maxsize=8192)
def is_stop_word(word: str, field: str = DEFAULT_TEXT_FIELD) -> bool:
    """Whether ``word`` is a stop word in ``field``'s language ("the", "of"; "les"…)."""
    return any(not _stop_filter(language).analyze(word) for language in stop_words_of(field))


# The stop words a weighed query scores low (``weigh_query_words``): Snowball's English
# list (its one-word entries; snowballstem.org/algorithms/english/stop.txt). Tantivy's
# own English list (33 words, above) marks snippets only; with it, CISI's questions
# kept most of their "what", "how", "about" (docs/decisions.md, "keyword side").
ENGLISH_QUERY_STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing would should could ought cannot a an the and but if or because as until
    while of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here there when
    where why how all any both each few more most other some such no nor not only own same
    so than too very""".split()  # noqa: SIM905 (the list as Snowball writes it)
)


@lru_cache(maxsize=8192)
def word_key(word: str) -> str:
    """What makes two query words the same word: their English stem ("systems",
    "System" → "system"), so a repeated word counts in any of its forms."""
    return " ".join(_english().analyze(fold_compatibility(word))) or word.casefold()


@cache
def _english() -> tantivy.TextAnalyzer:
    return _analyzer(LATIN_STEMMERS["en"])


def is_query_stop_word(word: str) -> bool:
    """Whether a weighed query gives ``word`` a stop word's weight ("what", "the"…)."""
    return word.casefold() in ENGLISH_QUERY_STOP_WORDS
