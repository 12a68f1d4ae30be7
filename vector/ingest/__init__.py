"""Ingest: source files -> front matter and sections -> chunks (with optional contexts) -> index sync. `runner` does the I/O around the pure steps."""
