"""The offline global answer's themes: what recurs across the documents a corpus-wide question is
about, what they say was missing, and the sections they share, each citing a community report."""
