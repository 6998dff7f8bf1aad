"""Retry transient LLM errors with exponential backoff and jitter; re-raise permanent ones."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from kevolve.agent.llm.base import LLMError, NonRetryableLLMError, TransientLLMError

log = logging.getLogger(__name__)
T = TypeVar("T")


def with_retries(call: Callable[[], T], *, retries: int, backoff_s: float, max_backoff_s: float,
                 what: str, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call`; on TransientLLMError wait and try again, up to `retries` more times."""
    attempt = 0
    while True:
        try:
            return call()
        except NonRetryableLLMError:
            raise
        except TransientLLMError as e:
            if attempt >= retries:
                raise LLMError(f"{what}: gave up after {attempt + 1} attempts: {e}") from None
            delay = min(max_backoff_s, backoff_s * 2**attempt) * (0.5 + random.random() / 2)
            log.warning("%s: %s; retry %d/%d in %.1fs", what, e, attempt + 1, retries, delay)
            sleep(delay)
            attempt += 1
