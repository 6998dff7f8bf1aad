"""A disk cache of replies keyed on the request: reruns and resumed runs call no model twice."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from kevolve.agent.llm.base import LLM, Completion, Message

log = logging.getLogger(__name__)


def request_key(llm_name: str, base_url: str | None, messages: list[Message], opts: dict[str, object]) -> str:
    """SHA-256 of everything that determines a reply (`sample` tells apart draws of one prompt)."""
    blob = json.dumps({"llm": llm_name, "base_url": base_url, "messages": [m.model_dump() for m in messages],
                       "opts": {k: opts[k] for k in sorted(opts)}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class CachedLLM:
    """Wraps an LLM; a hit is returned with `cached=True` and zero cost (nothing was spent)."""

    def __init__(self, inner: LLM, cache_dir: Path, base_url: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dir = Path(cache_dir)
        self.base_url = base_url
        self.dir.mkdir(parents=True, exist_ok=True)

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        key = request_key(self.name, self.base_url, messages, opts)
        path = self.dir / key[:2] / f"{key}.json"
        if path.exists():
            try:
                hit = Completion.model_validate_json(path.read_text())
                return hit.model_copy(update={"cached": True, "cost_usd": 0.0})
            except ValueError:
                log.warning("unreadable cache entry %s; calling the model", path)
        sent = {k: v for k, v in opts.items() if k != "sample"}
        out = self.inner.complete(messages, **sent)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Atomic write: a kill -9 mid-write must not leave a half entry that later reads as a hit.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(out.model_dump_json())
        os.replace(tmp, path)
        return out
