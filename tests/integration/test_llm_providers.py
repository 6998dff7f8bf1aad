"""The real openai and anthropic SDKs against the local fake server: replies, tokens and cost,
retries of transient errors, permanent errors that stop, and the disk cache."""

from __future__ import annotations

import pytest
from fake_llm_server import FakeLLMServer
from pydantic import SecretStr

from kevolve.agent.config import LLMConfig
from kevolve.agent.llm import LLMError, Message, NonRetryableLLMError, make_llm

MSGS = [Message(role="system", content="You write kernels."), Message(role="user", content="Task: translate relu")]


def cfg(server: FakeLLMServer, provider: str, **kw: object) -> LLMConfig:
    url = server.anthropic_url if provider == "anthropic" else server.openai_url
    base = dict(provider=provider, model="gpt-4o" if provider != "anthropic" else "claude-sonnet-4-6",
                base_url=url, api_key=SecretStr("sk-test"), timeout_s=2.0, max_retries=3, backoff_s=0.01,
                max_backoff_s=0.05)
    base.update(kw)
    return LLMConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
def server():
    s = FakeLLMServer(rules=[("translate", ["```python\nclass ModelNew: pass\n```"])]).start()
    yield s
    s.stop()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "compatible"])
def test_reply_text_tokens_and_cost_are_recorded(server, provider) -> None:
    out = make_llm(cfg(server, provider)).complete(MSGS)
    assert "class ModelNew" in out.text
    assert out.prompt_tokens > 50 and out.completion_tokens > 10
    assert out.cost_usd > 0 and not out.cached
    if provider == "anthropic":
        assert server.seen[-1].path.endswith("/messages")
        assert server.seen[-1].body["system"] == "You write kernels."
    else:
        assert server.seen[-1].path.endswith("/chat/completions")


def test_price_table_is_configurable(server) -> None:
    out = make_llm(cfg(server, "openai", model="my-model", prices={"my-": (1e6, 0.0)})).complete(MSGS)
    assert out.cost_usd == pytest.approx(out.prompt_tokens)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_transient_errors_429_500_and_timeout_are_retried(server, provider) -> None:
    server.faults = [429, 500, ("hang", 3.0)]
    out = make_llm(cfg(server, provider, timeout_s=1.0)).complete(MSGS)
    assert "ModelNew" in out.text
    assert [s.status for s in server.seen[:2]] == [429, 500]
    assert [s.status for s in server.seen] == [429, 500, 408, 200]  # 408: the hung one, timed out


def test_retries_are_bounded(server) -> None:
    server.faults = [500] * 10
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        make_llm(cfg(server, "openai", max_retries=2)).complete(MSGS)
    assert len(server.seen) == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_401_is_permanent_and_not_retried(server, provider) -> None:
    server.always_status = 401
    with pytest.raises(NonRetryableLLMError, match="401"):
        make_llm(cfg(server, provider)).complete(MSGS)
    assert len(server.seen) == 1


def test_unknown_model_is_permanent(server) -> None:
    server.known_models = ("gpt-4o",)
    with pytest.raises(NonRetryableLLMError, match="not found"):
        make_llm(cfg(server, "openai", model="gpt-nope")).complete(MSGS)
    assert len(server.seen) == 1


def test_disk_cache_makes_a_rerun_free(server, tmp_path) -> None:
    c = cfg(server, "openai", cache_dir=tmp_path / "llm")
    first = make_llm(c).complete(MSGS, sample="g0-j0")
    again = make_llm(c).complete(MSGS, sample="g0-j0")
    other = make_llm(c).complete(MSGS, sample="g0-j1")
    assert len(server.seen) == 2
    assert again.text == first.text and again.cached and again.cost_usd == 0.0 and not other.cached
    assert "sample" not in server.seen[0].body
