"""The one LLM-call kernel: every structured call (a forced tool call) and every free-text answer goes
through here, so the real API's habits are handled once.

A structured call (`call_tool`):
- forces the tool; a model that rejects a forced `tool_choice` (400 invalid_request_error, as
  thinking models answer) is asked again with `tool_choice: auto`, and that model keeps `auto` for
  the rest of the process (the 400 is not billed, but costs a round trip);
- validates the tool's input with the tool's pydantic model, coercing where the intent is clear
  ("8" -> 8, a missing or null list -> empty) and salvaging the valid part: an invalid item of a
  list is dropped alone (named in `ToolReply.dropped`), never the whole reply;
- `stop_reason`: "refusal" -> `RefusedError`, no retry (the same request is refused again, and
  billed again); "max_tokens" -> one retry with twice the budget (the identical request would be
  cut at the same place), then `MalformedReply`; thinking blocks are ignored (core.llm.client keeps text
  and tool_use blocks only);
- a reply that does not fit the model (no tool call, a required field missing) is asked once more,
  then `MalformedReply`.

A free-text call (`complete_text`) gets the same refusal and max_tokens rules: a cut answer is never
returned as if it were whole.

Metering: every reply's usage goes to the meter of the current context (`UsageMeter.metering`),
so a question's every call is counted, whichever LLM object made it.

Errors: `MalformedReply` and `RefusedError` are `LLMError`s, so a caller that falls back on any LLM
failure keeps doing so; one that counts refusals apart checks `isinstance(err, RefusedError)`.
"""
from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Generic, Sequence, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ValidationError, ValidationInfo, WrapValidator

from core.llm.client import LLM, Task
from core.llm.usage import Usage, meter_reply
from core.llm.errors import LLMError, RefusedError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

MAX_TOKENS_CEILING = 16_384  # a budget doubled past this is a reply that should be asked for differently


class MalformedReply(LLMError):
    """The model's reply does not fit what was asked (twice), or was cut at max_tokens twice."""


# --- coercing types for tool-input models ---------------------------------------------------------


def _collapse(value: Any) -> Any:
    return " ".join(value.split()) if isinstance(value, str) else value


def _not_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


def _number(value: Any) -> Any:
    # bool is an int subclass and pydantic would take True as 1: no model means a boolean as a number
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str):
        value = value.strip()
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _ids(value: Any) -> Any:
    """Ids as integers, whether sent as 3 or "3"; anything else in the list is no id and is left out."""
    if value is None:
        return []
    if not isinstance(value, list):
        return value  # pydantic says what is wrong
    return [int(v) for v in value if (isinstance(v, int) and not isinstance(v, bool))
            or (isinstance(v, str) and v.strip().isdigit())]


def clamped(low: float, high: float):
    """A finite number (or numeric string) clamped into [low, high]."""
    return Annotated[float, BeforeValidator(_number), AfterValidator(_finite),
                     AfterValidator(lambda v: min(high, max(low, v)))]


Text = Annotated[str, BeforeValidator(_collapse)]  # whitespace collapsed; "" allowed
Name = Annotated[str, BeforeValidator(_collapse), AfterValidator(_not_empty)]  # ... and required non-empty
Ids = Annotated[list[int], BeforeValidator(_ids)]
Flag = Annotated[bool, BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v)]


def _salvage(value: Any, handler, info: ValidationInfo) -> list:
    if value is None:  # a list left out (or null): nothing of that kind was found
        return []
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    kept = []
    for n, item in enumerate(value):
        try:
            kept.extend(handler([item]))
        except ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(p) for p in problem["loc"][1:])
            dropped = info.context.setdefault("dropped", []) if info.context is not None else []
            dropped.append(f"{info.field_name}[{n}]{'.' + where if where else ''}: {problem['msg']}")
    return kept


# A list whose invalid items are dropped one by one (each named in ToolReply.dropped); use with a default.
Salvaged = Annotated[list[T], WrapValidator(_salvage)]


# --- tools ----------------------------------------------------------------------------------------


def object_schema(properties: dict[str, dict], required: Sequence[str] | None = None) -> dict:
    """A JSON Schema object of `properties`, every one of them required unless `required` names fewer."""
    return {"type": "object", "properties": properties,
            "required": list(properties if required is None else required)}


@dataclass(frozen=True)
class Tool(Generic[M]):
    """A tool the model is made to call: its definition as sent, and the model its input must fit."""

    name: str
    description: str
    input_schema: dict  # JSON Schema as the model sees it (written by hand: descriptions, enums, bounds)
    reply: type[M]

    @property
    def definition(self) -> dict:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass
class ToolReply(Generic[T]):
    value: T  # the tool's model, or what `convert` made of it
    usage: Usage  # every call this one made (retries included)
    model: str  # the model id that answered
    dropped: list[str] = field(default_factory=list)  # invalid list items left out, each with its reason


@dataclass
class TextReply:
    text: str
    usage: Usage
    model: str


def _costing(err: LLMError, usage: Usage) -> LLMError:
    """`err` carrying what the calls before it cost: paid for even though the reply is unusable."""
    err.usage = usage
    return err


def validate(tool: Tool[M], tool_input: dict[str, Any] | None) -> tuple[M, list[str]]:
    """The tool input as the tool's model, and what was dropped from it; MalformedReply if unusable."""
    if tool_input is None:
        raise MalformedReply(f"no {tool.name} call in the reply")
    context: dict = {"dropped": []}
    try:
        return tool.reply.model_validate(tool_input, context=context), context["dropped"]
    except ValidationError as err:
        problem = err.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or tool.name
        raise MalformedReply(f"{tool.name} input {where}: {problem['msg']}") from None


# Models (per LLM object and task) seen rejecting a forced tool_choice: asked with `auto` from then on.
_auto_only: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()
_auto_lock = threading.Lock()


def rejects_forced_tool(err: LLMError) -> bool:
    """A 400 to a forced `tool_choice`, as models with thinking enabled answer."""
    return err.status == 400 and "tool_choice" in str(err)


def _uses_auto(llm: LLM, task: str) -> bool:
    with _auto_lock:
        try:
            return task in _auto_only.get(llm, ())
        except TypeError:  # an LLM that cannot be weakly referenced is asked forced every time
            return False


def _remember_auto(llm: LLM, task: str) -> None:
    with _auto_lock:
        try:
            _auto_only.setdefault(llm, set()).add(task)
        except TypeError:  # not weakly referenceable: it is asked forced each time and falls back again
            pass


def call_tool(llm: LLM, tool: Tool[M], *, task: Task, system: str, messages: list[dict], max_tokens: int,
              cached_prefix: str | None = None, convert: Callable[[M], Any] | None = None) -> ToolReply:
    """One structured call, by the module's rules. `convert`: the caller's checks that need what it sent
    (ids of the rows in the prompt, say), turning the validated input into the reply's value; its
    MalformedReply counts as a malformed reply (asked once more). Raises RefusedError, MalformedReply
    or LLMError."""
    usage, budget = Usage(calls=0), max_tokens
    auto = _uses_auto(llm, task)
    grown = asked_again = False
    while True:
        choice = {"type": "auto"} if auto else {"type": "tool", "name": tool.name}
        try:
            response = llm.complete(task=task, system=system, messages=messages, max_tokens=budget,
                                    cached_prefix=cached_prefix, tools=[tool.definition], tool_choice=choice)
        except LLMError as err:
            if auto or not rejects_forced_tool(err):
                raise
            auto = True
            _remember_auto(llm, task)
            continue
        usage.add(response.usage)
        meter_reply(response.model, response.usage)
        if response.stop_reason == "refusal":
            raise _costing(RefusedError(f"the model refused the {tool.name} call"), usage)
        if response.stop_reason == "max_tokens":
            if grown or budget >= MAX_TOKENS_CEILING:
                raise _costing(MalformedReply(f"{tool.name} reply cut at max_tokens={budget} twice (first budget "
                                              f"{max_tokens}); send a smaller input"), usage)
            budget, grown = min(budget * 2, MAX_TOKENS_CEILING), True
            continue
        try:
            value, dropped = validate(tool, response.tool_input)
            if convert is not None:
                value = convert(value)
        except MalformedReply as err:
            if asked_again:
                raise _costing(MalformedReply(f"malformed model output twice, last: {err}"), usage) from None
            asked_again = True
            continue
        return ToolReply(value, usage, response.model, dropped)


def complete_text(llm: LLM, *, task: Task, system: str, messages: list[dict], max_tokens: int,
                  cached_prefix: str | None = None, temperature: float | None = None) -> TextReply:
    """A free-text reply, whole: refusal -> RefusedError; cut at max_tokens -> one retry with twice the
    budget, then MalformedReply (a cut answer is never returned as if complete)."""
    usage, budget = Usage(calls=0), max_tokens
    while True:
        response = llm.complete(task=task, system=system, messages=messages, max_tokens=budget,
                                cached_prefix=cached_prefix, temperature=temperature)
        usage.add(response.usage)
        meter_reply(response.model, response.usage)
        if response.stop_reason == "refusal":
            raise _costing(RefusedError("the model refused to answer"), usage)
        if response.stop_reason != "max_tokens":
            return TextReply(response.text, usage, response.model)
        if budget != max_tokens or budget >= MAX_TOKENS_CEILING:
            raise _costing(MalformedReply(f"reply cut at max_tokens={budget} twice (first budget {max_tokens})"),
                           usage)
        budget = min(budget * 2, MAX_TOKENS_CEILING)


def stream_text(llm: LLM, *, task: Task, system: str, messages: list[dict], max_tokens: int,
                on_text: Callable[[str], None]) -> TextReply:
    """`complete_text`, its text handed to `on_text` as it arrives when `llm` can stream (AnthropicLLM's
    `stream_text`; else the whole reply at once). What was handed on cannot be taken back, so a reply
    cut at max_tokens is not asked again: MalformedReply, and the caller withdraws what was shown."""
    streamer = getattr(llm, "stream_text", None)
    if streamer is None:
        reply = complete_text(llm, task=task, system=system, messages=messages, max_tokens=max_tokens)
        on_text(reply.text)
        return reply
    response = streamer(task=task, system=system, messages=messages, max_tokens=max_tokens, on_text=on_text)
    meter_reply(response.model, response.usage)
    if response.stop_reason == "refusal":
        raise _costing(RefusedError("the model refused to answer"), response.usage)
    if response.stop_reason == "max_tokens":
        raise _costing(MalformedReply(f"reply cut at max_tokens={max_tokens} while streaming"), response.usage)
    return TextReply(response.text, response.usage, response.model)
