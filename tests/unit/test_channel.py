"""The judge's channel: what a runner writes is read as data, whatever its bytes."""

from __future__ import annotations

import json
import os
import struct

from kevolve.sandbox.common.channel import Channel


def frame(obj: object) -> bytes:
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def test_lone_surrogates_in_a_frame_are_replaced_and_pairs_kept() -> None:
    r, w = os.pipe()
    ch = Channel(r, w)
    os.write(w, frame({"reason": "x \udcff\ud800 y", "names": ["\ud83d\ude00"], "\udc80": 1}))
    msg = ch.recv(1.0)
    ch.close()
    assert msg == {"reason": "x \ufffd\ufffd y", "names": ["\U0001f600"], "\ufffd": 1}
    assert json.dumps(msg, ensure_ascii=False).encode("utf-8")  # writable as UTF-8 now
