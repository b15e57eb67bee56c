"""The controller's side of the P4Runtime contract of docs/protocol.md, *Trust*, against the fake P4Runtime server: set_slot's
`generation`, `port_role` entries from hosts.json, codes from P4Info or the packaged copy (never p4src)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from controller.codes import FALLBACKS, PortRole
from controller.hosts import load_plan
from controller.p4dataplane import P4RuntimeDataPlane
from kvpool.keys import ChunkKey
from p4rt.p4info import P4Info, enum_from_source
from tests.controller.test_p4runtime import P4INFO_PATH, connect, fake  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


def contract_p4info() -> P4Info:
    """The minimal P4Info: set_slot(…, generation) and table port_role(ingress_port) are in it, as in kvswitch.p4."""
    return P4Info.load(P4INFO_PATH)


def test_index_entries_carry_the_generation_and_read_back_with_it(fake):  # noqa: F811
    _server, address = fake
    switch = connect(address, contract_p4info())
    try:
        dp = P4RuntimeDataPlane(switch)
        key = ChunkKey(1, 0xAB, 2)
        dp.install(key, 3, min_version=0, generation=41)
        outcome = dp.swap(None, ChunkKey(1, 0xCD, 0), 4, 0, 42)
        assert outcome.install_error is None
        assert dp.installed_entries() == {key: (3, 41), ChunkKey(1, 0xCD, 0): (4, 42)}
    finally:
        switch.close()


def write_plan(tmp_path, ports=None) -> Path:
    hosts = [{"name": "h1", "ip": "10.0.0.1", "mac": "02:00:00:00:00:01", "port": 1, "role": "inference"},
             {"name": "st1", "ip": "10.0.0.100", "mac": "02:00:00:00:00:64", "port": 5, "role": "storage"}]
    data: dict = {"hosts": hosts}
    if ports is not None:
        data["ports"] = ports
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(data))
    return path


def test_port_roles_come_from_the_plans_ports(tmp_path, fake):  # noqa: F811
    plan = load_plan(write_plan(tmp_path, [{"port": 1, "role": "host"}, {"port": 5, "role": "storage"},
                                           {"port": 3, "role": "fabric"}]))
    assert plan.ports == {1: PortRole.HOST, 5: PortRole.STORAGE, 3: PortRole.FABRIC}
    _server, address = fake
    switch = connect(address, contract_p4info())
    try:
        dp = P4RuntimeDataPlane(switch)
        assert dp.install_port_roles(plan.ports) == 2  # HOST is the table's default: no entry
        assert dp.install_port_roles(plan.ports) == 2  # idempotent
        entries = switch.read_table("port_role")
        assert sorted((e.match["standard_metadata.ingress_port"].value, e.params["role"]) for e in entries) == [
            (3, PortRole.FABRIC), (5, PortRole.STORAGE)]
    finally:
        switch.close()


def test_without_ports_only_ports_of_storage_routes_are_trusted(tmp_path):
    assert load_plan(write_plan(tmp_path)).ports == {5: PortRole.STORAGE}


@pytest.mark.parametrize("ports", [[{"port": 1, "role": "king"}], [{"port": 600, "role": "host"}], [{"role": "host"}],
                                   {"port": 1}])
def test_bad_ports_are_reported_with_the_entry(tmp_path, ports):
    with pytest.raises(ValueError, match=r"hosts\.json"):
        load_plan(write_plan(tmp_path, ports))


# ---- codes: P4Info first, then the packaged copy; the copy equals the P4 source ---------------------------

def test_packaged_codes_agree_with_the_p4_source():
    """Every code of the program is in the copy the controller falls back to, with the program's value (read here,
    at test time, never at run time). The copy may run ahead of the source by members the data plane adds."""
    source = (ROOT / "p4src" / "include" / "constants.p4").read_text()
    for name, enum in FALLBACKS.items():
        found = enum_from_source(source, name)
        if not found and name == "port_role_t":  # until the data plane adds it: the contract's values
            found = {"HOST": 0, "STORAGE": 1, "FABRIC": 2}
        packaged = {m.name: int(m) for m in enum}
        assert found and found.items() <= packaged.items(), name


def test_controller_code_never_reads_the_p4_source():
    for path in [*(ROOT / "controller").glob("*.py"), *(ROOT / "p4rt").glob("*.py")]:
        code = re.sub(r'"""(.|\n)*?"""', "", path.read_text())  # docstrings may name the program
        assert not re.search(r"p4src|constants\.p4|(?<!def )enum_from_source\(", code), path


def test_a_p4info_without_enums_falls_back_to_the_packaged_codes(fake):  # noqa: F811
    message = P4Info.load(P4INFO_PATH).message
    message.type_info.ClearField("serializable_enums")
    _server, address = fake
    switch = connect(address, P4Info(message))
    try:
        dp = P4RuntimeDataPlane(switch)
        assert dp.punt_reasons == {"CLIENT_OP": 1, "SLOT_REPLY": 2} and dp.events["GET_HIT"] == 1
    finally:
        switch.close()
