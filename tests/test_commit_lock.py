"""The index's commit lock: one commit at a time across processes, and nested holds
in one thread — two stores of one index included — never wait for themselves."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from rag_serving.index.commit_lock import local_commit_lock

REPO = Path(__file__).resolve().parents[1]


def test_two_holders_of_one_index_in_one_thread_nest(tmp_path: Path) -> None:
    first, second = local_commit_lock(tmp_path), local_commit_lock(tmp_path / ".." / tmp_path.name)
    assert first is second  # one lock per data dir in a process
    done = threading.Event()

    def nested() -> None:
        with first, second, first:
            done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done.is_set(), "a nested hold of the commit lock waited for itself"


def test_another_process_waits_for_the_commit(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time; from pathlib import Path;"
            "from rag_serving.index.commit_lock import local_commit_lock;"
            "lock = local_commit_lock(Path(sys.argv[1]));"
            "lock.__enter__(); print('held', flush=True); time.sleep(1.5); lock.__exit__()"
        ), str(tmp_path)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    with local_commit_lock(tmp_path):
        waited = time.monotonic() - started
    holder.wait(timeout=10)
    assert waited > 1.0, f"took the lock after {waited:.2f} s while another process held it"
    # and a thread of this process waits for this thread's hold likewise
    lock, order = local_commit_lock(tmp_path), []
    with lock:
        other = threading.Thread(
            target=lambda: (lock.__enter__(), order.append("other"), lock.__exit__())
        )
        other.start()
        time.sleep(0.3)
        order.append("mine")
    other.join(timeout=10)
    assert order == ["mine", "other"]


def test_a_table_created_by_another_writer_while_waiting_is_opened(tmp_path: Path) -> None:
    """Two embedding steps of a new index both find no table and both go to create it:
    the second, once it holds the lock, opens the table the first made (whose primary
    key makes its schema differ from the bare one) instead of failing on it."""
    from rag_serving.index import schema as schemas
    from rag_serving.index.store import IndexStore

    first, second = IndexStore(tmp_path), IndexStore(tmp_path)
    opened: list[object] = []
    errors: list[BaseException] = []

    def open_second() -> None:
        try:
            opened.append(second.table("documents", schemas.DOCUMENTS))
        except BaseException as exc:
            errors.append(exc)

    with first.writing():
        waiting = threading.Thread(target=open_second)
        waiting.start()
        time.sleep(0.5)  # the second store found no table and waits for the lock
        first.table("documents", schemas.DOCUMENTS)
    waiting.join(timeout=30)
    assert not errors, errors
    assert len(opened) == 1 and second.table_exists("documents")


def test_a_table_left_without_a_version_by_a_killed_creator_is_created(tmp_path: Path) -> None:
    """A writer killed while creating a table leaves its folder, listed but without a
    version: the next writer creates the table there (it failed with LanceDB's "was not
    found"), and readers see it as empty until then."""
    from rag_serving.index import schema as schemas
    from rag_serving.index.store import IndexStore

    store = IndexStore(tmp_path)
    store.files()  # the index's folder exists
    leftover = store.layout.lancedb_uri.rstrip("/") + "/documents.lance"
    Path(leftover, "data").mkdir(parents=True)
    Path(leftover, "data", "partial.lance").write_bytes(b"")
    store = IndexStore(tmp_path)
    assert store.table_exists("documents")  # listed…
    assert store.count("documents") == 0  # …but nothing to read
    assert store.read("documents").num_rows == 0
    table = store.table("documents", schemas.DOCUMENTS)
    assert table.count_rows() == 0
    assert IndexStore(tmp_path).table("documents").schema == table.schema
