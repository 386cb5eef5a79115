"""Git repositories: reading them with pygit2 (``repository``), the rules for files
that are not indexed (``rules``), listing the files of one ref and the commits of
the history window (``listing``), the commits of a file in ``neighbors``
(``relations``), and the ``SourceKind`` (``kind``)."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.git import hits
from rag_sources.kinds.git.config import GitSourceConfig
from rag_sources.kinds.git.relations import COMMITS

KIND = KindInfo(
    GitSourceConfig,
    "rag_sources.kinds.git.kind:GitKind",
    relations=(COMMITS,),
    byline=hits.byline,
    history_types=("commit",),
    whole_documents=False,
)
