"""Schemathesis fuzzes the archive API from its own OpenAPI spec, against a real uvicorn server.

Properties: no response is a 5xx, responses match the spec, and no write (POST / DELETE) succeeds
without the server's KEVOLVE_API_TOKEN.
"""

from __future__ import annotations

import urllib.request

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from archive_server import TOKEN, serve
from kevolve.archive.embed import HashingEmbedder
from kevolve.archive.store import Archive
from kevolve.archive.synthetic import entries

MAX_EXAMPLES = 30


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'a.db'}"
    Archive(url, embedder=HashingEmbedder()).put_many(list(entries(60, n_problems=6, seed=41)))
    with serve(url) as base:
        yield base


def _check(case, response) -> None:  # noqa: ANN001
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
    if case.method.upper() in ("POST", "PUT", "PATCH", "DELETE"):
        sent = (case.headers or {}).get("Authorization", "")
        if sent != f"Bearer {TOKEN}":
            assert response.status_code in (401, 403, 422), f"write accepted without the token: {response.status_code}"
    case.validate_response(response)


def test_api_has_no_server_errors_and_refuses_writes_without_token(base_url: str) -> None:
    # Operations are fuzzed one by one with hypothesis (schemathesis' pytest plugin needs a schema at collection
    # time, and the server only exists once the fixture has started it).
    schema = schemathesis.openapi.from_url(base_url + "/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 7
    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case) -> None:  # noqa: ANN001
            _check(case, case.call(timeout=60))

        fuzz()


def test_kernel_survives_the_fuzzing(base_url: str) -> None:
    """The fuzzer sent DELETEs without the token: every kernel must still be there."""
    import json

    stats = json.loads(urllib.request.urlopen(base_url + "/api/stats", timeout=30).read())
    assert stats["kernels"] == 60
