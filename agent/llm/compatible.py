"""Any server speaking the OpenAI chat-completions wire format (vLLM, Ollama, llama.cpp server)."""

from __future__ import annotations

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm.base import NonRetryableLLMError
from kevolve.agent.llm.openai_api import OpenAILLM


class CompatibleLLM(OpenAILLM):
    """OpenAILLM pointed at `base_url`; a key is optional (local servers ignore it)."""

    def __init__(self, config: LLMConfig) -> None:
        if not config.base_url:
            raise NonRetryableLLMError("compatible: needs a server URL (--base-url http://host:port/v1)")
        super().__init__(config)
