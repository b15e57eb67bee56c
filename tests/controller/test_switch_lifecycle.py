"""SwitchConnection's lifecycle under races and restarts: close() against the supervisor, and what a restart logs.

The races are forced at unit level: a hook runs the competing call at the exact point of the interleaving.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import grpc
import pytest

from p4rt import connection as switch_module
from p4rt.connection import SwitchConnection, SwitchOptions
from p4rt.errors import P4RuntimeError
from p4rt.p4info import P4Info
from tests.controller.fake_p4rt import FakeServer
from tests.controller.test_p4runtime import wait_for

P4INFO_PATH = Path(__file__).parent / "data" / "kvswitch_min.p4info.txtpb"
LOGGER = "p4rt.connection"


@pytest.fixture
def p4info():
    return P4Info.load(P4INFO_PATH)


@pytest.fixture
def fake():
    server = FakeServer()
    address = server.start()
    yield server, address
    server.stop()


class RecordingQueue:
    def __init__(self) -> None:
        self.items: list = []

    def put(self, item) -> None:
        self.items.append(item)


class RecordingChannel:
    """A grpc.Channel stand-in (or wrapper of a real one) that counts close() calls."""

    def __init__(self, inner: grpc.Channel | None = None) -> None:
        self.inner = inner
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        if self.inner is not None:
            self.inner.close()

    def __getattr__(self, name):
        return getattr(self.inner, name)


class RacingConnection(SwitchConnection):
    """Runs `race` (once) at the first read of `_requests`: the competing _drop_stream lands between another
    caller's check of the attribute and its use, the interleaving that lost the stream object under it."""

    race = None

    @property
    def _requests(self):
        value = self._requests_value  # what the caller's check saw ...
        race, self.race = self.race, None
        if race is not None:
            race()  # ... and then the competitor runs before the caller acts on it
        return value

    @_requests.setter
    def _requests(self, value) -> None:
        self._requests_value = value


def test_concurrent_stream_drops_end_the_stream_and_close_the_channel_once(p4info):
    connection = RacingConnection(SwitchOptions("127.0.0.1:1"), p4info)
    requests, channel = RecordingQueue(), RecordingChannel()
    connection._requests, connection._channel = requests, channel
    errors: list[BaseException] = []

    def supervisor_drop() -> None:
        try:
            connection._drop_stream()
        except BaseException as exc:  # the test reports what the other thread raised
            errors.append(exc)

    competitors: list[threading.Thread] = []

    def race() -> None:
        competitor = threading.Thread(target=supervisor_drop)
        competitors.append(competitor)
        competitor.start()
        competitor.join(0.2)  # done at once without a lock; blocked until we release it with one

    connection.race = race
    connection.close()  # close() drops the stream while the supervisor does the same
    wait_for(lambda: requests.items and channel.closes)
    for competitor in competitors:  # a competitor blocked until close() released it: count after it finished
        competitor.join(10)
    assert errors == []
    assert requests.items == [None]
    assert channel.closes == 1
    assert connection._channel is None and connection._requests_value is None


def test_close_between_the_loop_check_and_establish_leaves_no_channel_open(fake, p4info, monkeypatch):
    _, address = fake
    connection = SwitchConnection(SwitchOptions(address, backoff_initial=0.01), p4info)
    opened: list[RecordingChannel] = []
    real_channel = grpc.insecure_channel

    def close_then_open(target, *args, **kwargs):
        connection.close()  # lands after the supervisor saw "not closed" and before the channel is used
        channel = RecordingChannel(real_channel(target, *args, **kwargs))
        opened.append(channel)
        return channel

    monkeypatch.setattr(switch_module.grpc, "insecure_channel", close_then_open)
    supervisor = threading.Thread(target=connection._supervise, daemon=True)
    supervisor.start()
    supervisor.join(2)
    assert not supervisor.is_alive(), "the supervisor kept a stream opened after close()"
    assert [c.closes for c in opened] == [1]
    assert connection.connections == 0


def test_on_connect_failing_after_close_logs_nothing_above_debug(p4info, caplog):
    def populate(_connection):
        raise P4RuntimeError("UNAVAILABLE", "connection to the switch lost; reconnecting")

    connection = SwitchConnection(SwitchOptions("127.0.0.1:1"), p4info, on_connect=populate)
    connection.close()
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    connection._run_on_connect()
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []
    assert any("after close" in r.getMessage() for r in caplog.records)
    assert not connection.wait_ready(0)


def test_switch_restart_logs_one_warning_and_one_recovery_with_the_downtime(fake, p4info, caplog):
    server, address = fake
    connection = SwitchConnection(SwitchOptions(address, backoff_initial=0.01, backoff_max=0.03), p4info)
    connection.open(timeout=5)
    try:
        caplog.set_level(logging.DEBUG, logger=LOGGER)
        server.stop()
        assert wait_for(lambda: sum("attempt" in r.getMessage() for r in caplog.records) >= 3)
        server.start()
        assert connection.wait_ready(5)
        records = [r for r in caplog.records if r.name == LOGGER]
        warnings = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
        recoveries = [r.getMessage() for r in records if r.levelno == logging.INFO]
        assert len(warnings) == 1 and "stream lost" in warnings[0]
        assert len(recoveries) == 1 and "reconnected after" in recoveries[0]
        assert " s (" in recoveries[0] and "failed attempts" in recoveries[0]
    finally:
        connection.close()
