"""RSS, Atom and JSON Feed feeds, archived as they are fetched."""
