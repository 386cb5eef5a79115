"""Feeds (``kind = "feeds"``): fetching over HTTP with conditional requests
(``fetch``), parsing RSS, Atom and JSON Feed (``parse``), reading OPML
subscriptions (``opml``), the per-source archive of every entry ever seen
(``archive``), and the ``SourceKind`` (``kind``). ``ragline status`` lists the
archive without fetching anything."""
