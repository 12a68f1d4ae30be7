"""Graph query: corpus-wide questions answered by map-reduce over community reports. `runner` loads the reader's level and reports."""
