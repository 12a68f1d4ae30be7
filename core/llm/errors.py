"""What the Anthropic API's failures mean to a caller: the one error type callers catch (`LLMError`, and
`RefusedError` for a refusal), whether a failure is worth retrying, the server's retry-after, and the
message that says what to do next. core.llm.client raises these; the SDK never leaks past it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import anthropic

    from core.llm.usage import Usage

from core.settings import Settings


class LLMError(Exception):
    """The one error callers catch: says what happened and what to do about it."""

    usage: Usage | None = None  # what the failed call(s) cost, when a reply came back (core.llm.prompting sets it)

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status  # HTTP status, None for network failures and timeouts
        self.retryable = retryable  # worth trying again later (rate limit, overload, outage)


class RefusedError(LLMError):
    """The model declined the request (stop_reason "refusal"). Never retried: the same request is
    refused again, and billed again; callers record it as refused and fall back."""


def is_retryable(err: anthropic.AnthropicError) -> bool:
    import anthropic
    if isinstance(err, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
        return True
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        return status in (408, 409, 429) or status >= 500
    return False


def retry_after_s(err: anthropic.AnthropicError) -> float | None:
    """The server's retry-after (`retry-after-ms` first, as the SDK reads it), in seconds."""
    response = getattr(err, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value:
            try:
                seconds = float(value) / scale
            except ValueError:
                continue  # an HTTP date: rare enough to back off instead
            if seconds >= 0:
                return seconds
    return None


def to_llm_error(err: anthropic.AnthropicError, model: str, settings: Settings) -> LLMError:
    import anthropic
    retries = settings.llm_max_retries
    after = f"after {retries} retries" if retries else "(retries disabled)"
    if isinstance(err, anthropic.APITimeoutError):
        return LLMError(f"Anthropic API request timed out (limit {settings.llm_timeout_s:g} s) {after}; "
                        "raise CROSSROADS_LLM_TIMEOUT_S or send a shorter prompt", retryable=True)
    if isinstance(err, anthropic.APIConnectionError):
        where = settings.anthropic_base_url or "api.anthropic.com"
        return LLMError(f"cannot reach the Anthropic API at {where} {after}: {err}; "
                        "check the network and anthropic_base_url", retryable=True)
    if not isinstance(err, anthropic.APIStatusError):
        return LLMError(f"Anthropic client error: {err}")

    status = err.status_code
    detail = err.api_message or err.message
    if err.request_id:
        detail += f" (request-id {err.request_id})"
    if status == 401:
        text, retryable = "authentication failed: check ANTHROPIC_API_KEY", False
    elif status == 403:
        text, retryable = f"permission denied for model {model!r}: check the API key's workspace and access", False
    elif status == 404:
        text, retryable = (f"not found: check the model id {model!r} (CROSSROADS_LLM_MODEL_FAST / _ANSWER) "
                           "and anthropic_base_url"), False
    elif status == 413:
        text, retryable = "request too large: send fewer or shorter passages", False
    elif status == 429:
        text, retryable = f"Anthropic API rate limit still exceeded {after}; lower concurrency or raise limits", True
    elif status == 529:
        text, retryable = f"Anthropic API overloaded (529) {after}; try again later", True
    elif status >= 500 or status in (408, 409):
        text, retryable = f"Anthropic API error {status} {after}; try again later", True
    else:
        text, retryable = (f"Anthropic API rejected the request ({status}): fix the request, "
                           "e.g. a malformed message or a prompt over the context window"), False
    return LLMError(f"{text} [{detail}]", status=status, retryable=retryable)
