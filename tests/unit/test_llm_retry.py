"""The retry policy: transient errors back off and retry; an unreachable server stops within seconds."""

from __future__ import annotations

import pytest

from kevolve.agent.llm.base import LLMError, NonRetryableLLMError, TransientLLMError, UnreachableLLMError
from kevolve.agent.llm.retry import UNREACHABLE_RETRIES, with_retries


def test_an_unreachable_server_is_fatal_after_a_few_short_waits_and_names_the_url() -> None:
    waits: list[float] = []
    calls = []

    def call() -> str:
        calls.append(1)
        raise UnreachableLLMError("http://127.0.0.1:9/v1", "APIConnectionError: Connection error.")

    with pytest.raises(NonRetryableLLMError) as e:
        with_retries(call, retries=5, backoff_s=2.0, max_backoff_s=60.0, what="openai:gpt-4o", sleep=waits.append)
    assert len(calls) == UNREACHABLE_RETRIES + 1 and sum(waits) <= 5.0
    msg = str(e.value)
    assert msg.startswith("openai:gpt-4o: cannot reach the LLM server at http://127.0.0.1:9/v1: check that it is")
    assert "\n" not in msg


def test_a_transient_error_is_retried_with_backoff_then_reported() -> None:
    waits: list[float] = []

    def call() -> str:
        raise TransientLLMError("HTTP 503: overloaded")

    with pytest.raises(LLMError) as e:
        with_retries(call, retries=3, backoff_s=2.0, max_backoff_s=60.0, what="m", sleep=waits.append)
    assert not isinstance(e.value, NonRetryableLLMError) and "gave up after 4 attempts" in str(e.value)
    assert len(waits) == 3 and waits[2] > waits[0]
