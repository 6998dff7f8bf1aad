"""Retry transient LLM errors with exponential backoff and jitter; re-raise permanent ones."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from kevolve.agent.llm.base import LLMError, NonRetryableLLMError, TransientLLMError, UnreachableLLMError

log = logging.getLogger(__name__)
T = TypeVar("T")
# A server that refuses connections is rarely back within seconds; a user waiting on minutes of
# backoff before hearing so is worse than a run stopped early (and resumed with --resume).
UNREACHABLE_RETRIES, UNREACHABLE_BACKOFF_S = 2, 1.0


def with_retries(call: Callable[[], T], *, retries: int, backoff_s: float, max_backoff_s: float,
                 what: str, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `call`; on TransientLLMError wait and try again, up to `retries` more times.

    An UnreachableLLMError (no connection at all) is tried UNREACHABLE_RETRIES more times, a second
    apart and more, then raised as NonRetryableLLMError: the run stops and says where it could not connect.
    """
    attempt = unreachable = 0
    while True:
        try:
            return call()
        except NonRetryableLLMError:
            raise
        except UnreachableLLMError as e:
            if unreachable >= min(retries, UNREACHABLE_RETRIES):
                raise NonRetryableLLMError(f"{what}: {e}") from None
            unreachable += 1
            log.warning("%s: no connection to %s (%s); retry %d/%d", what, e.endpoint, e.detail, unreachable,
                        UNREACHABLE_RETRIES)
            sleep(UNREACHABLE_BACKOFF_S * unreachable)
        except TransientLLMError as e:
            if attempt >= retries:
                raise LLMError(f"{what}: gave up after {attempt + 1} attempts: {e}") from None
            delay = min(max_backoff_s, backoff_s * 2**attempt) * (0.5 + random.random() / 2)
            log.warning("%s: %s; retry %d/%d in %.1fs", what, e, attempt + 1, retries, delay)
            sleep(delay)
            attempt += 1
