"""Keyword search in every script (issue 14, item 1): Chinese, Japanese, Korean and
Thai are matched by character bigrams, Hindi and Arabic words stay whole, Latin text
is stemmed for its language (configured or detected), and snippets and filters keep
working. Real text: Chinese notes of the Obsidian Hub vault and chapters of the
Japanese, Arabic and Devanagari EPUBs in ../shared/data."""

from __future__ import annotations

import html
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.analysis import (
    DEFAULT_TEXT_FIELD,
    NOSPACE_RUN,
    analyze,
    bigram_query_text,
    bigrams_of,
    detect_text_field,
    text_field_for,
)
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.errors import IndexNeedsUpgradeError
from tests.conftest import CHINESE_NOTES, HUB_PLUGINS, SHARED_DATA, build_index, write_config

EPUBS = SHARED_DATA / "corpora" / "epub"
FRENCH = (
    "# Chansons\n\nLes chanteuses interprètent des mélodies anciennes dans les villages "
    "de montagne. Chaque été, les habitants se réunissent pour écouter ces chansons "
    "traditionnelles et danser jusqu'à l'aube.\n"
)
ENGLISH = (
    "# Gardening\n\nThe gardeners were planting tomatoes and watering the seedlings every "
    "morning before the heat of the day.\n"
)


# ---- the analyzers -------------------------------------------------------------


def test_scripts_without_spaces_are_cut_into_characters() -> None:
    assert analyze("機械学習の応用") == ["機", "械", "学", "習", "の", "応", "用"]
    assert analyze("한국어 텍스트") == ["한", "국", "어", "텍", "스", "트"]
    assert analyze("ラーメン") == ["ラ", "ー", "メ", "ン"]
    # A Latin word touching Han characters is a word of its own.
    assert analyze("typora的方式") == ["typora", "的", "方", "式"]


def test_words_keep_their_combining_marks() -> None:
    # The old tokenizer split Devanagari words at every vowel sign.
    assert analyze("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    # A long Devanagari word (3 bytes a letter) is not dropped as too long.
    long_word = "नरॊत्तमम" * 3
    assert analyze(long_word) == [long_word]


def test_latin_text_is_stemmed_and_folded_and_other_scripts_stemmed_by_their_own_rules() -> None:
    assert analyze("Running runners") == ["run", "runner"]
    assert analyze("café naïve") == ["cafe", "naiv"]
    assert analyze("книги читают") == ["книг", "чита"]
    # French words are stemmed only in the French field.
    assert analyze("chanteuses", "text_fr") == analyze("chanteuse", "text_fr")
    assert analyze("chanteuses", "text_none") == ["chanteuses"]


def test_query_runs_become_bigram_terms_and_snippet_phrases() -> None:
    assert bigram_query_text("機械学習") == (
        " text_bigrams:機械 text_bigrams:械学 text_bigrams:学習"
        ' text_bigrams:"機械 械学 学習"^1.0'  # the exact substring scores above scattered bigrams
        ' title:"機械" title:"械学" title:"学習" '
    )
    assert bigram_query_text("機械学習", snippets=True) == ' "機械" "械学" "学習" '
    assert bigram_query_text("東京") == ' text_bigrams:東京 title:"東京" '
    assert bigram_query_text("calendar") == "calendar"
    # Punctuation between two characters does not cut the run (as in the text field).
    assert bigram_query_text("て、末", snippets=True) == ' "て末" '
    # A phrase the user quoted stays exact; so does a run after a field name.
    assert bigram_query_text('"機械学習" 応用').startswith('"機械学習"  text_bigrams:応用')
    assert bigram_query_text("title:機械学習") == "title:機械学習"
    assert bigrams_of("abc 機械学習の応用") == "機械 械学 学習 習の の応 応用"
    assert bigrams_of("「御自身は」と云う") == "御自 自身 身は はと と云 云う"


def test_language_detection_picks_the_latin_field() -> None:
    assert detect_text_field(FRENCH) == "text_fr"
    assert detect_text_field(ENGLISH) == DEFAULT_TEXT_FIELD
    assert detect_text_field("def f(x): return x") == DEFAULT_TEXT_FIELD  # too short
    assert detect_text_field("機械学習の応用について書いたノートです。" * 5) == DEFAULT_TEXT_FIELD
    assert text_field_for("fr") == "text_fr"
    assert text_field_for("ja") == DEFAULT_TEXT_FIELD
    assert text_field_for("none") == "text_none"
    assert text_field_for("auto") is None


# ---- real notes, indexed -------------------------------------------------------


def _epub_chapter(name: str, member: str, chars: int, spaced: bool) -> str:
    raw = zipfile.ZipFile(EPUBS / name).read(member).decode("utf-8")
    body = raw.split("<body", 1)[-1]
    body = re.sub(r"<rt>.*?</rt>|<rp>.*?</rp>", "", body)  # Japanese ruby readings
    text = html.unescape(re.sub(r"<[^>]+>", " ", body.split(">", 1)[-1]))
    text = " ".join(text.split()) if spaced else "".join(text.split())
    return text[:chars]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    if not EPUBS.is_dir():
        pytest.fail(f"{EPUBS} is missing: run with ../shared/data or -m 'not shared_data'")
    return {
        "japanese-2": _epub_chapter(
            "kusamakura-japanese-vertical-writing.epub", "OPS/xhtml/二.xhtml", 1200, False
        ),
        "japanese-5": _epub_chapter(
            "kusamakura-japanese-vertical-writing.epub", "OPS/xhtml/五.xhtml", 1200, False
        ),
        "arabic": _epub_chapter(
            "regime-anticancer-arabic.epub", "EPUB/Content/C_content.xhtml", 1500, True
        ),
        "hindi": _epub_chapter("mahabharata.epub", "EPUB/xhtml/b01001.xhtml", 1500, True),
    }


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory: pytest.TempPathFactory, texts: dict[str, str]) -> RaglineConfig:
    """Two sources: a vault of real notes in six scripts ("auto"), and a French one."""
    root = tmp_path_factory.mktemp("languages")
    vault = root / "vault"
    (vault / "hub").mkdir(parents=True)
    for name in CHINESE_NOTES:
        shutil.copy(HUB_PLUGINS / name, vault / "hub" / name)
    (vault / "books").mkdir()
    (vault / "books" / "草枕 二.md").write_text(f"# 草枕 二\n\n{texts['japanese-2']}\n")
    (vault / "books" / "草枕 五.md").write_text(f"# 草枕 五\n\n{texts['japanese-5']}\n")
    (vault / "books" / "Arabic.md").write_text(f"# السرطان\n\n{texts['arabic']}\n")
    (vault / "books" / "Hindi.md").write_text(f"# महाभारत\n\n{texts['hindi']}\n")
    (vault / "Gardening.md").write_text(ENGLISH)
    french = root / "french"
    french.mkdir()
    (french / "Chansons.md").write_text(FRENCH)
    config_path = write_config(
        root,
        [
            {"name": "vault", "kind": "markdown", "path": str(vault)},
            {"name": "french", "kind": "markdown", "path": str(french), "language": "fr"},
        ],
    )
    return build_index(config_path)


@pytest.fixture(scope="module")
def engine(multilingual: RaglineConfig) -> SearchEngine:
    return SearchEngine(multilingual)


def _bm25_paths(engine: SearchEngine, query: str, **filters: object) -> list[str]:
    result = engine.search(query, k=5, mode="bm25", filters=SearchFilters(**filters))
    return [hit.path for hit in result.hits]


@pytest.mark.shared_data
def test_chinese_substrings_find_their_note(engine: SearchEngine) -> None:
    # Four-character substrings of the notes' sentences: one token each before.
    assert _bm25_paths(engine, "农历节气")[0] == "hub/dust-calendar.md"
    assert _bm25_paths(engine, "背单词")[0] == "hub/openwords.md"
    assert _bm25_paths(engine, "同步到博客")[0] == "hub/sync-cnblog.md"
    # Words the note does not hold in that order still match by their bigrams.
    assert _bm25_paths(engine, "周期性的笔记")[0] == "hub/dust-calendar.md"


@pytest.mark.shared_data
def test_japanese_arabic_and_hindi_substrings_find_their_note(
    engine: SearchEngine, texts: dict[str, str]
) -> None:
    chapters = {"japanese-2": "books/草枕 二.md", "japanese-5": "books/草枕 五.md"}
    for key, path in chapters.items():
        other = texts["japanese-5" if key == "japanese-2" else "japanese-2"]
        # Six-character runs of kana and kanji (no punctuation) only this chapter has.
        runs = [m.group(0)[:6] for m in NOSPACE_RUN.finditer(texts[key]) if len(m.group(0)) >= 6]
        fragments = [f for f in runs if f not in other][:5]
        assert len(fragments) == 5
        for fragment in fragments:
            assert _bm25_paths(engine, fragment)[0] == path, fragment
    arabic_words = texts["arabic"].split()[40:43]
    assert _bm25_paths(engine, " ".join(arabic_words))[0] == "books/Arabic.md"
    hindi_words = texts["hindi"].split()[30:32]
    assert _bm25_paths(engine, " ".join(hindi_words))[0] == "books/Hindi.md"


@pytest.mark.shared_data
def test_mixed_language_notes_and_every_mode_work(engine: SearchEngine) -> None:
    # An English word and a Chinese phrase of the same note.
    assert _bm25_paths(engine, "typora 粘贴图片")[0] == "hub/image-classify-paste.md"
    assert _bm25_paths(engine, "gardener planted tomato")[0] == "Gardening.md"
    hybrid = engine.search("农历节气", k=3, mode="hybrid")
    assert hybrid.hits[0].path == "hub/dust-calendar.md"


@pytest.mark.shared_data
def test_snippets_highlight_the_matched_characters(engine: SearchEngine) -> None:
    hit = engine.search("农历节气", k=1, mode="bm25").hits[0]
    assert "**农**" in hit.snippet or "**农历**" in hit.snippet.replace("****", "")
    assert "节" in hit.snippet
    french = engine.search("chanteuse", k=1, mode="bm25").hits[0]
    assert french.path == "Chansons.md"
    assert "**chanteuses**" in french.snippet


@pytest.mark.shared_data
def test_filters_still_apply(engine: SearchEngine) -> None:
    assert _bm25_paths(engine, "农历节气", sources=("french",)) == []
    assert _bm25_paths(engine, "农历节气", path_prefix="books/") == []
    assert _bm25_paths(engine, "农历节气", path_prefix="hub/")[0] == "hub/dust-calendar.md"


@pytest.mark.shared_data
def test_a_configured_language_stems_that_language(engine: SearchEngine) -> None:
    # "fr": the plural and the singular meet; English stemming would not join them.
    assert _bm25_paths(engine, "chanteuse") == ["Chansons.md"]
    assert _bm25_paths(engine, "mélodie ancienne") == ["Chansons.md"]
    assert _bm25_paths(engine, "melodie") == ["Chansons.md"]  # folded accents


def _fulltext(config: RaglineConfig) -> FulltextIndex:
    layout = IndexLayout(config.data_dir)
    active = read_manifest(layout.manifest_path).active
    assert active is not None
    return FulltextIndex(layout.fulltext_dir(active.key))


def _stored_fields(index: FulltextIndex, source: str) -> set[str]:
    searcher = index.index.searcher()
    import tantivy

    query = tantivy.Query.term_query(index.index.schema, "source", source)
    return {
        searcher.doc(address).get_first("text_field")
        for _score, address in searcher.search(query, limit=1000).hits
    }


def _copy(index: RaglineConfig, root: Path, *edit: tuple[str, str]) -> RaglineConfig:
    """A copy of ``index`` (data and config) under ``root``, its config edited."""
    shutil.copytree(index.data_dir, root / "data")
    text = Path(index.config_path or "").read_text()
    for old, new in [(str(index.data_dir), str(root / "data")), *edit]:
        text = text.replace(old, new)
    (root / "ragline.toml").write_text(text)
    return parse_config_file(root / "ragline.toml")


@pytest.mark.shared_data
def test_changing_a_sources_language_reindexes_its_keywords_only(
    tmp_path: Path, multilingual: RaglineConfig
) -> None:
    # A copy of the index whose french source is switched to "none".
    root = tmp_path / "copy"
    config = _copy(multilingual, root, ('language = "fr"', 'language = "none"'))
    assert _stored_fields(_fulltext(config), "french") == {"text_fr"}
    build_index(root / "ragline.toml")
    assert _stored_fields(_fulltext(config), "french") == {"text_none"}
    engine = SearchEngine(config)
    assert _bm25_paths(engine, "chanteuses") == ["Chansons.md"]
    assert _bm25_paths(engine, "chanteuse") == []  # no stemming any more


@pytest.mark.shared_data
def test_an_index_of_the_old_analyzers_is_rebuilt_by_the_next_run(
    tmp_path: Path, multilingual: RaglineConfig
) -> None:
    root = tmp_path / "old"
    config = _copy(multilingual, root)
    layout = IndexLayout(config.data_dir)
    active = read_manifest(layout.manifest_path).active
    assert active is not None
    (layout.fulltext_dir(active.key) / "ragline-fulltext.json").unlink()  # as before the stamp
    with pytest.raises(IndexNeedsUpgradeError, match="run `ragline index` to rebuild"):
        SearchEngine(config)
    build_index(root / "ragline.toml")
    assert _bm25_paths(SearchEngine(config), "农历节气")[0] == "hub/dust-calendar.md"
