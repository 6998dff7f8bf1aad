"""The LLM interface shared by every vendor: `LLM.complete(messages, **opts) -> Completion`."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import Field

from kevolve.records import Record


class Message(Record):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


class Completion(Record):
    """One reply, with what it cost."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    finish_reason: str = Field(default="stop", description="'stop', or 'length' when the reply was cut off")
    cached: bool = Field(default=False, description="served from the disk cache: no call, no cost")


class LLMError(RuntimeError):
    """A call failed after its retries; the message is one line for the user."""


class NonRetryableLLMError(LLMError):
    """A permanent error (bad key, unknown model, bad request): retrying cannot help; stop the run."""


class TransientLLMError(LLMError):
    """A rate limit, server error or timeout: worth retrying with backoff."""


class UnreachableLLMError(TransientLLMError):
    """No connection to the server at all (refused, no such host): retried briefly, then fatal."""

    def __init__(self, endpoint: str, detail: str) -> None:
        super().__init__(f"{unreachable_hint(endpoint)} ({detail})")
        self.endpoint, self.detail = endpoint, detail


def unreachable_hint(endpoint: str) -> str:
    """What to check when the server at `endpoint` cannot be reached (one line)."""
    return (f"cannot reach the LLM server at {endpoint}: check that it is running and listening there, the URL "
            "(--base-url or the provider's *_BASE_URL variable), and any proxy or firewall in between")


class LLM(Protocol):
    """A chat model. `opts` are per-call settings such as `max_tokens`, `temperature`, `sample`."""

    name: str

    def complete(self, messages: list[Message], **opts: object) -> Completion: ...


def price(prices: dict[str, tuple[float, float]], model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for one call: the longest model-name prefix in the table wins; unknown models cost 0."""
    best = max((k for k in prices if model.startswith(k)), key=len, default=None)
    if best is None:
        return 0.0
    inp, out = prices[best]
    return (prompt_tokens * inp + completion_tokens * out) / 1e6


def describe_http_error(e: Exception) -> str:
    """One line for an SDK error: status code and the server's own message."""
    status = getattr(e, "status_code", None)
    body = getattr(e, "body", None)
    msg = None
    if isinstance(body, dict):
        err = body.get("error")
        msg = err.get("message") if isinstance(err, dict) else body.get("message")
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    text = str(msg) if msg else first
    return f"HTTP {status}: {text}" if status else f"{type(e).__name__}: {text}"
