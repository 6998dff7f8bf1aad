"""OpenAI chat completions through the official `openai` SDK (also any OpenAI-compatible server)."""

from __future__ import annotations

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm.base import (Completion, Message, NonRetryableLLMError, TransientLLMError,
                                    UnreachableLLMError, describe_http_error, price)
from kevolve.agent.llm.retry import with_retries


class OpenAILLM:
    """`LLM` over the chat-completions endpoint. The SDK's own retries are off: ours are tested."""

    def __init__(self, config: LLMConfig) -> None:
        import openai

        self.config = config
        self.name = config.label
        key = config.api_key.get_secret_value() if config.api_key else None
        if key is None and config.base_url is None:
            raise NonRetryableLLMError("openai: no API key: set OPENAI_API_KEY")
        self._client = openai.OpenAI(api_key=key or "none", base_url=config.base_url,
                                     timeout=config.timeout_s, max_retries=0)

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        c = self.config
        return with_retries(lambda: self._once(messages, opts), retries=c.max_retries, backoff_s=c.backoff_s,
                            max_backoff_s=c.max_backoff_s, what=self.name)

    def _once(self, messages: list[Message], opts: dict[str, object]) -> Completion:
        import openai

        c = self.config
        try:
            r = self._client.chat.completions.create(
                model=c.model, messages=[m.model_dump() for m in messages],  # type: ignore[misc]
                max_tokens=int(opts.get("max_tokens", c.max_tokens)),  # type: ignore[arg-type]
                temperature=float(opts.get("temperature", c.temperature)))  # type: ignore[arg-type]
        except openai.APITimeoutError as e:  # a subclass of APIConnectionError: the server is there, but slow
            raise TransientLLMError(describe_http_error(e)) from None
        except openai.APIConnectionError as e:
            raise UnreachableLLMError(str(self._client.base_url), describe_http_error(e)) from None
        except (openai.RateLimitError, openai.InternalServerError) as e:
            raise TransientLLMError(describe_http_error(e)) from None
        except openai.APIStatusError as e:
            if e.status_code in (408, 409) or e.status_code >= 500:
                raise TransientLLMError(describe_http_error(e)) from None
            raise NonRetryableLLMError(f"{self.name}: {describe_http_error(e)}") from None
        choice = r.choices[0] if r.choices else None
        text = (choice.message.content or "") if choice else ""
        pt = r.usage.prompt_tokens if r.usage else 0
        ct = r.usage.completion_tokens if r.usage else 0
        return Completion(text=text, model=r.model or c.model, prompt_tokens=pt, completion_tokens=ct,
                          cost_usd=price(c.prices, c.model, pt, ct),
                          finish_reason=(choice.finish_reason or "stop") if choice else "stop")

