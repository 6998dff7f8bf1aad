"""Build the OptimizeConfig at an entry point from flags / arguments and the environment.

The only place in the agent that looks at environment variables, and only through the `env`
mapping its callers pass in (the CLI and `kevolve.optimize` pass `os.environ`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr, ValidationError

from kevolve.agent.config import EvolutionConfig, LLMConfig, OptimizeConfig, StopConfig
from kevolve.languages import LANGUAGES
from kevolve.records import KernelLanguage
from kevolve.sandbox.config import BWRAP_ENV, SandboxConfig


class SettingsError(ValueError):
    """A bad flag or argument; the message is one line for the user."""


# OpenAI-compatible local servers, by the name people call them, and where they listen by default.
LOCAL_SERVERS = {"vllm": "http://localhost:8000/v1", "ollama": "http://localhost:11434/v1",
                 "llamacpp": "http://localhost:8080/v1", "compatible": None}
KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "compatible": "KEVOLVE_LLM_API_KEY"}
URL_VARS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "compatible": "KEVOLVE_LLM_BASE_URL"}


def llm_config(spec: str, base_url: str | None, env: Mapping[str, str], cache_dir: Path | None) -> LLMConfig:
    """'openai:gpt-4o', 'anthropic:claude-sonnet-4-6', 'vllm:Qwen/Qwen2.5-Coder-32B' … with the key
    from the vendor's usual environment variable."""
    provider, sep, model = spec.partition(":")
    provider = provider.strip().lower()
    if provider == "demo":  # the project's recorded replies (agent/llm/demo.py): no key, no network
        return LLMConfig(provider="demo", model=model.strip() or "relu-cpu", cache_dir=None)
    if not sep or not model.strip():
        raise SettingsError(f"--llm {spec!r}: expected PROVIDER:MODEL, e.g. openai:gpt-4o or anthropic:claude-sonnet-4-6")
    if provider in LOCAL_SERVERS:
        base_url = base_url or env.get(URL_VARS["compatible"]) or LOCAL_SERVERS[provider]
        provider = "compatible"
        if not base_url:
            raise SettingsError("--llm compatible:MODEL needs --base-url http://HOST:PORT/v1")
    elif provider not in KEY_VARS:
        raise SettingsError(f"--llm {spec!r}: unknown provider {provider!r} (openai, anthropic, vllm, ollama, "
                            "llamacpp or compatible with --base-url)")
    else:
        base_url = base_url or env.get(URL_VARS[provider]) or None
    key = env.get(KEY_VARS[provider])
    if provider == "openai" and not key and not base_url:
        raise SettingsError("--llm openai:…: no API key: set OPENAI_API_KEY")
    if provider == "anthropic" and not key:
        raise SettingsError("--llm anthropic:…: no API key: set ANTHROPIC_API_KEY")
    return LLMConfig(provider=provider, model=model.strip(), base_url=base_url,
                     api_key=SecretStr(key) if key else None, cache_dir=cache_dir)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.I)


def parse_duration(text: str) -> float:
    """'90', '90s', '30m', '2h' -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise SettingsError(f"{text!r}: expected a duration such as 600, 90s, 30m or 2h")
    unit = (m.group(2) or "s").lower()[0]
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[unit]


_TOKENS = re.compile(r"^(\d+(?:\.\d+)?)\s*([km]?)\s*(?:tokens?|tok)$")
_DEVICE = re.compile(r"^(.+?)\s*(?:gpu|device)$")


def parse_budget(text: str) -> dict[str, float]:
    """--budget: '40' (candidates), '$5' or '5usd' (dollars), '30m' / '2h' (time), '200k tokens' (LLM tokens),
    '20m gpu' / '600 device' (the evaluations' device time); comma-separated."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low = part.lower()
        try:
            if m := _TOKENS.match(low):
                out["budget_tokens"] = int(float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2)])
            elif m := _DEVICE.match(low):
                out["budget_device_s"] = parse_duration(m.group(1))
            elif low.startswith("$") or low.endswith("usd"):
                out["budget_usd"] = float(low.strip("$").removesuffix("usd"))
            elif low.isdigit():
                out["max_candidates"] = int(low)
            else:
                out["time_limit_s"] = parse_duration(low)
        except (ValueError, SettingsError):
            raise SettingsError(f"--budget {part!r}: expected N (candidates), $X (dollars), a duration (30m), Nk tokens "
                                "or a device time (20m gpu)") from None
    return out


def saved_config(runs_dir: Path, run: str) -> OptimizeConfig | None:
    """The config a run was started with (its LLM, or offline), for --resume without --llm; None if no such run."""
    from kevolve.agent.rundir import RunFolder

    folder = RunFolder.find(runs_dir, run)
    if folder is None:
        return None
    return OptimizeConfig.model_validate_json((folder.path / "config.json").read_text())


def parse_language(value: str | None, device: str) -> KernelLanguage | None:
    """--language: one of kevolve/languages.py's names (None: the target's default); some need a GPU."""
    if value is None:
        return None
    try:
        lang = KernelLanguage(value.strip().lower())
    except ValueError:
        raise SettingsError(f"--language must be one of {', '.join(LANGUAGES)}, not {value!r}") from None
    if LANGUAGES[lang.value].gpu_only and not device.startswith("cuda"):
        cpu = [n for n, entry in LANGUAGES.items() if not entry.gpu_only]
        raise SettingsError(f"--language {lang.value} writes GPU kernels: it needs --device cuda "
                            f"(on the CPU: --language {' or '.join(cpu)})")
    return lang


def build_config(*, llm: str | LLMConfig | None, base_url: str | None = None, env: Mapping[str, str], device: str,
                 language: str | None = None, runs_dir: Path = Path("runs"), cache_root: Path | None = None,
                 llm_cache: bool = True,
                 llm_cache_dir: Path | None = None, parallel_evaluations: int | None = None,
                 archive: bool = True, archive_ingest: str | None = None, sandbox: Mapping[str, object] | None = None,
                 stop: Mapping[str, object] | None = None, evolution: Mapping[str, object] | None = None,
                 prompts_dir: Path | None = None, offline: bool = False, race: bool = True,
                 gpus: tuple[int, ...] = ()) -> OptimizeConfig:
    """The whole config; unset values keep the defaults of the config classes. `llm` is a
    'PROVIDER:MODEL' spec, or a ready LLMConfig (for an LLM object the caller injects); None with `offline`.
    `language` is --language's value (None: the target's default)."""
    root = cache_root or Path(env.get("KEVOLVE_CACHE_DIR") or Path.home() / ".cache" / "kevolve")
    cache = (llm_cache_dir or root / "llm") if llm_cache else None
    if offline or llm is None:
        llm = None
    elif isinstance(llm, LLMConfig):
        llm = llm.model_copy(update={"cache_dir": cache})
    else:
        llm = llm_config(llm, base_url, env, cache)
    sandbox_kw = {"bwrap": env.get(BWRAP_ENV) or None, **{k: v for k, v in (sandbox or {}).items() if v is not None}}
    try:
        return OptimizeConfig(
            llm=llm, offline=offline,
            sandbox=SandboxConfig(device=device, cache_dir=root, **sandbox_kw),
            stop=StopConfig(**{k: v for k, v in (stop or {}).items() if v is not None}),
            evolution=EvolutionConfig(**{k: v for k, v in (evolution or {}).items() if v is not None}),
            language=parse_language(language, device), runs_dir=runs_dir, archive=archive,
            archive_ingest=archive_ingest,
            parallel_evaluations=parallel_evaluations or 1, prompts_dir=prompts_dir, race=race, gpus=gpus)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise SettingsError(f"{where}: {err['msg']}") from None
