"""The client agent of the veth bed answers bad requests with an error line and keeps serving."""

from __future__ import annotations

import json

import pytest

from kvpool.client import ClientOptions
from kvtesting.kvagent import Agent, serve


@pytest.fixture
def agent():
    a = Agent(ClientOptions(server=("127.0.0.1", 9), timeout=0.05, retries=0))
    yield a
    a.close()


@pytest.mark.parametrize(("line", "error"), [
    ("not json", "JSONDecodeError"),
    ('{"op": "fly"}', "unknown op 'fly'"),
    ('{"op": "put", "ph": 1}', "KeyError"),
    ('{"op": "put", "ph": 1, "data": "zz", "version": 1}', "ValueError"),
])
def test_bad_request_gets_an_error_answer(agent, line, error):
    out: list[str] = []
    serve(agent, [line, ""], out.append)
    assert len(out) == 1
    answer = json.loads(out[0])
    assert answer["ok"] is False
    assert error in answer["error"]


def test_agent_keeps_answering_after_a_bad_request(agent):
    out: list[str] = []
    serve(agent, ["{", '{"op": "fly"}'], out.append)
    assert [json.loads(line)["ok"] for line in out] == [False, False]
