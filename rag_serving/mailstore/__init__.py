"""Mail in the standard formats (mbox, Maildir, .eml, Apple Mail .emlx): finding
mailboxes, splitting mbox files, listing messages with a per-mailbox cache, and
reading one message into a structured record. No ``rag_assets`` or ``dagster``
imports: ``ragline status`` lists mail through here."""
