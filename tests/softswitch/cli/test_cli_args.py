"""simple_switch_grpc's command line, as `python -m softswitch` parses it."""

from __future__ import annotations

import logging
import pathlib

import pytest

from softswitch.cli import UsageError, parse_args
from softswitch.ports import PortSpec


def test_bmv2_style_command_line_is_understood():
    o = parse_args(["prog.json", "-i", "1@veth0", "-i", "2@veth2", "--device-id", "3", "--thrift-port", "9090",
                    "--log-console", "-L", "debug", "--pcap", "/tmp/cap", "--",
                    "--grpc-server-addr", "127.0.0.1:50051", "--cpu-port", "255"])
    assert o.program == pathlib.Path("prog.json")
    assert o.ports == (PortSpec(1, "veth0"), PortSpec(2, "veth2"))
    assert (o.device_id, o.cpu_port, o.grpc_address) == (3, 255, "127.0.0.1:50051")
    assert o.pcap_dir == pathlib.Path("/tmp/cap")
    assert o.log_console and o.log_level == logging.DEBUG
    assert o.ignored == ("--thrift-port",)


def test_no_p4_and_cpu_port_before_the_separator():
    o = parse_args(["--no-p4", "--cpu-port", "64"])
    assert o.program is None and o.cpu_port == 64 and o.grpc_address == "0.0.0.0:9559"


def test_packet_in_is_taken_not_ignored():
    o = parse_args(["--no-p4", "--packet-in", "ipc:///tmp/sw.ipc", "-i", "1@veth0"])
    assert o.packet_in == "ipc:///tmp/sw.ipc"
    assert o.ignored == ()


@pytest.mark.parametrize(("argv", "message"), [
    ([], "PROGRAM or --no-p4"),
    (["p.p4", "--no-p4"], "not both"),
    (["--no-p4", "-i", "veth0"], "PORT@INTERFACE"),
    (["--no-p4", "--", "--bogus"], "unknown target option"),
    (["--no-p4", "--packet-in", "/tmp/sw.ipc"], "expected ipc://PATH or tcp://HOST:PORT"),
])
def test_bad_command_line_is_a_usage_error(argv, message):
    with pytest.raises(UsageError, match=message) as e:
        parse_args(argv)
    assert e.value.status == 2


def test_unknown_switch_flag_exits_with_usage_status(capsys):
    with pytest.raises(UsageError) as e:
        parse_args(["--no-p4", "--frobnicate"])
    assert e.value.status == 2
    assert "usage:" in capsys.readouterr().err
