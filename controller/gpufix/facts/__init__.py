"""Facts: the snapshot model, the typed view the engine reads, and how facts are gathered."""
