"""A chain (multi-hop) question answered hop by hop from the passages a search found."""
