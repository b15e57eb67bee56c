"""The trace loader: the shipped excerpt loads, and every malformed line is an error naming file:line."""

import json

import pytest

from evaluation.traces import TraceError, default_trace_path, excerpt_path, load_trace, parse_lines

GOOD = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}


def lines(*records):
    return [r if isinstance(r, str) else json.dumps(r) for r in records]


def test_excerpt_loads_in_time_order_with_chained_blocks():
    trace = load_trace(excerpt_path())
    assert len(trace.requests) == 1500
    times = [r.arrival_s for r in trace.requests]
    assert times == sorted(times)
    assert all(r.blocks[0] == 0 for r in trace.requests)  # Mooncake conversation: shared first block
    assert trace.block_references == sum(len(r.blocks) for r in trace.requests)


def test_timestamps_are_converted_from_milliseconds_to_seconds():
    requests = list(parse_lines(lines(GOOD, {**GOOD, "timestamp": 1500})))
    assert [r.arrival_s for r in requests] == [0.0, 1.5]


def test_last_block_tokens_are_the_remainder_of_the_prompt():
    (request,) = parse_lines(lines(GOOD))
    assert [request.block_tokens(i) for i in range(2)] == [512, 88]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"timestamp": 0, "input_length": 600,', "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "hash_ids"}), "missing field(s) hash_ids"),
        (json.dumps({**GOOD, "timestamp": -0.5}), "earlier than the previous line"),
        (json.dumps({**GOOD, "hash_ids": [0]}), "expected ceil(600/512) = 2"),
        (json.dumps({**GOOD, "hash_ids": [0, "x"]}), "integers only"),
        (json.dumps({**GOOD, "input_length": True}), "must be an integer"),
        (json.dumps({**GOOD, "timestamp": "now"}), "finite number"),
        ("", "empty line"),
    ],
)
def test_bad_line_is_reported_with_file_and_line_number(tmp_path, bad_line, message):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), json.dumps(GOOD), bad_line, json.dumps(GOOD)]) + "\n")
    with pytest.raises(TraceError) as error:
        load_trace(path)
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)
    assert error.value.line == 3


def test_missing_file_and_empty_file_are_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        load_trace(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TraceError, match="empty"):
        load_trace(empty)


def test_limit_reads_only_the_first_requests():
    assert len(load_trace(excerpt_path(), limit=10).requests) == 10


def test_default_trace_path_follows_the_environment(tmp_path):
    path = default_trace_path(environ={"KVSWITCH_TRACES": str(tmp_path)})
    assert path == tmp_path / "mooncake" / "conversation_trace.jsonl"
