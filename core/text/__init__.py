"""The text kernel shared by ingest, search, the graph and the router: language detection, Snowball stemming,
query terms, name keys and the offline mention finder. Pure: no I/O."""
