"""Anthropic messages through the official `anthropic` SDK."""

from __future__ import annotations

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm.base import (Completion, Message, NonRetryableLLMError, TransientLLMError,
                                    UnreachableLLMError, describe_http_error, price)
from kevolve.agent.llm.retry import with_retries

_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class AnthropicLLM:
    """`LLM` over the messages endpoint. System messages go in `system`, as the API wants."""

    def __init__(self, config: LLMConfig) -> None:
        import anthropic

        self.config = config
        self.name = config.label
        key = config.api_key.get_secret_value() if config.api_key else None
        if key is None:
            raise NonRetryableLLMError("anthropic: no API key: set ANTHROPIC_API_KEY")
        self._client = anthropic.Anthropic(api_key=key, base_url=config.base_url,
                                           timeout=config.timeout_s, max_retries=0)

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        c = self.config
        return with_retries(lambda: self._once(messages, opts), retries=c.max_retries, backoff_s=c.backoff_s,
                            max_backoff_s=c.max_backoff_s, what=self.name)

    def _once(self, messages: list[Message], opts: dict[str, object]) -> Completion:
        import anthropic

        c = self.config
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        kw: dict[str, object] = {"system": system} if system else {}
        try:
            r = self._client.messages.create(
                model=c.model, messages=chat, max_tokens=int(opts.get("max_tokens", c.max_tokens)),  # type: ignore[arg-type]
                **kw)  # the current messages API takes no temperature
        except anthropic.APITimeoutError as e:  # a subclass of APIConnectionError: the server is there, but slow
            raise TransientLLMError(describe_http_error(e)) from None
        except anthropic.APIConnectionError as e:
            raise UnreachableLLMError(str(self._client.base_url), describe_http_error(e)) from None
        except (anthropic.RateLimitError, anthropic.InternalServerError) as e:
            raise TransientLLMError(describe_http_error(e)) from None
        except anthropic.APIStatusError as e:
            if e.status_code in (408, 409, 529) or e.status_code >= 500:
                raise TransientLLMError(describe_http_error(e)) from None
            raise NonRetryableLLMError(f"{self.name}: {describe_http_error(e)}") from None
        text = "".join(getattr(b, "text", "") for b in r.content if getattr(b, "type", "") == "text")
        pt, ct = r.usage.input_tokens, r.usage.output_tokens
        return Completion(text=text, model=r.model or c.model, prompt_tokens=pt, completion_tokens=ct,
                          cost_usd=price(c.prices, c.model, pt, ct),
                          finish_reason=_STOP.get(r.stop_reason or "end_turn", r.stop_reason or "stop"))

