"""A scripted LLM for tests and offline demos: replies chosen by rules on the prompt, no network."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kevolve.agent.llm.base import Completion, Message


class ScriptedLLM:
    """Replies from `rules`: the first (substring, replies) pair whose substring is in the last user
    message answers, cycling through its replies; `default` answers when no rule matches."""

    def __init__(self, rules: Sequence[tuple[str, Sequence[str]]], default: str = "", name: str = "scripted") -> None:
        self.rules = [(needle, list(replies)) for needle, replies in rules]
        self.default = default
        self.name = name
        self.calls: list[list[Message]] = []
        self._next = [0] * len(self.rules)
        self._lock = threading.Lock()

    def complete(self, messages: list[Message], **opts: object) -> Completion:
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        with self._lock:
            self.calls.append(list(messages))
            text = self.default
            for i, (needle, replies) in enumerate(self.rules):
                if needle in prompt and replies:
                    text = replies[self._next[i] % len(replies)]
                    self._next[i] += 1
                    break
        return Completion(text=text, model=self.name, prompt_tokens=len(prompt) // 4,
                          completion_tokens=len(text) // 4)
