"""LLM vendors behind one interface: `LLM.complete(messages, **opts) -> Completion`.

One file per vendor; `make_llm` picks one from the config and wraps it in the disk cache.
"""

from __future__ import annotations

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm.base import (LLM, Completion, LLMError, Message, NonRetryableLLMError,
                                    TransientLLMError)

PROVIDERS = ("openai", "anthropic", "compatible", "demo")


def make_llm(config: LLMConfig) -> LLM:
    """The vendor client for `config`, behind the disk cache when `config.cache_dir` is set."""
    if config.provider == "openai":
        from kevolve.agent.llm.openai_api import OpenAILLM

        llm: LLM = OpenAILLM(config)
    elif config.provider == "anthropic":
        from kevolve.agent.llm.anthropic_api import AnthropicLLM

        llm = AnthropicLLM(config)
    elif config.provider == "compatible":
        from kevolve.agent.llm.compatible import CompatibleLLM

        llm = CompatibleLLM(config)
    elif config.provider == "demo":
        from kevolve.agent.llm.demo import demo_llm

        return demo_llm()  # recorded replies: nothing to cache
    else:
        raise NonRetryableLLMError(f"unknown LLM provider {config.provider!r} (use one of {', '.join(PROVIDERS)})")
    if config.cache_dir is not None:
        from kevolve.agent.llm.cache import CachedLLM

        llm = CachedLLM(llm, config.cache_dir, config.base_url)
    return llm


__all__ = ["LLM", "Completion", "LLMError", "Message", "NonRetryableLLMError", "TransientLLMError", "make_llm"]
