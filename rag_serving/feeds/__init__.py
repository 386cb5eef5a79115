"""Feeds (``kind = "feeds"``): fetching over HTTP with conditional requests
(``fetch``), parsing RSS, Atom and JSON Feed (``parse``), reading OPML
subscriptions (``opml``) and the per-source archive of every entry ever seen
(``archive``). No Dagster and no ``rag_assets`` here: ``ragline status`` lists the
archive without fetching anything."""
