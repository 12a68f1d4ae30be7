"""Search: the hybrid searcher (vector leg + full-text leg, fusion, rerank) and its query transforms. All read-side SQL is in `sql`."""
