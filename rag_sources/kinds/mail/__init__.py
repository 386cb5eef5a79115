"""Mail in the standard formats (mbox, Maildir, .eml, Apple Mail .emlx): finding
mailboxes, splitting mbox files, listing messages with a per-mailbox cache
(``listing``), reading one message into a structured record (``message``), a
message's thread in ``neighbors`` (``thread``), and the ``SourceKind`` (``kind``).
``ragline status`` lists mail through ``listing``."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.mail import hits
from rag_sources.kinds.mail.config import MailSourceConfig
from rag_sources.kinds.mail.filters import FOLDERS, RECIPIENTS, SENDERS
from rag_sources.kinds.mail.thread import THREAD

KIND = KindInfo(
    MailSourceConfig,
    "rag_sources.kinds.mail.kind:MailKind",
    relations=(THREAD,),
    filters=(SENDERS, RECIPIENTS, FOLDERS),
    hit_details=(hits.FOLDER,),
    byline=hits.byline,
)
