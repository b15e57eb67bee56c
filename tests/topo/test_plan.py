"""Topologies are data (topology.json): the plan derived from them gives each switch a route to every endpoint
and a role to every port."""

from __future__ import annotations

import json

import pytest

from topo.plan import plan_of
from topo.topologies import (
    GENERATORS,
    LAYOUTS,
    STORAGE_IP,
    KvTopo,
    TopologyError,
    leaf_spine,
    load_topology,
    star,
)


def routes(plan, switch):
    sw = next(s for s in plan.switches if s.name == switch)
    return {r.name: r.port for r in sw.routes}


@pytest.mark.parametrize("hosts", [1, 4, 9])
def test_star_gives_every_host_its_own_port_and_storage_the_last(hosts):
    plan = plan_of(KvTopo(star(hosts)))
    expected = {f"h{i}": i for i in range(1, hosts + 1)} | {"st1": hosts + 1}
    assert routes(plan, "s1") == expected
    assert [p for p, _ in plan.switches[0].ports] == list(range(1, hosts + 2))
    assert plan.storage.ip == STORAGE_IP


def test_star_addresses_and_macs_follow_the_host_number():
    plan = plan_of(KvTopo(star(3)))
    assert [(e.name, e.ip, e.mac) for e in plan.inference_hosts] == [
        ("h1", "10.0.0.1", "00:00:0a:00:00:01"), ("h2", "10.0.0.2", "00:00:0a:00:00:02"),
        ("h3", "10.0.0.3", "00:00:0a:00:00:03")]


def test_management_end_is_not_an_endpoint():
    assert "mgmt" not in {e.name for e in plan_of(KvTopo(star(2))).endpoints}


def test_leaf_spine_routes_remote_hosts_through_the_first_spine():
    plan = plan_of(KvTopo(leaf_spine(4, 2, 2)))
    assert routes(plan, "l1") == {"h1": 1, "h2": 2, "h3": 101, "h4": 101, "st1": 101}
    assert routes(plan, "l2") == {"h1": 101, "h2": 101, "h3": 1, "h4": 2, "st1": 3}
    assert routes(plan, "sp1") == {"h1": 1, "h2": 1, "h3": 2, "h4": 2, "st1": 2}
    assert sorted(s.device_id for s in plan.switches) == [1, 2, 3, 4]


@pytest.mark.parametrize("hosts", [0, 100])
def test_host_count_outside_the_address_plan_is_refused(hosts):
    with pytest.raises(TopologyError, match="hosts must be"):
        star(hosts)


def test_hosts_json_lists_name_ip_mac_port_per_endpoint(tmp_path):
    sw = plan_of(KvTopo(star(2))).switches[0]
    data = json.loads(sw.write_hosts_file(tmp_path / "s1" / "hosts.json").read_text())
    assert data["switch"] == "s1" and data["device_id"] == 1
    assert data["hosts"][2] == {"name": "st1", "ip": "10.0.0.100", "mac": "00:00:0a:00:00:64", "port": 3,
                                "role": "storage"}
    assert data["ports"] == [{"port": 1, "role": "host"}, {"port": 2, "role": "host"}, {"port": 3, "role": "storage"}]


def test_leaf_spine_ports_to_other_switches_are_fabric():
    roles = {sw.name: dict(sw.port_roles) for sw in plan_of(KvTopo(leaf_spine(4))).switches}
    assert roles["l1"] == {1: "host", 2: "host", 101: "fabric", 102: "fabric"}
    assert roles["l2"] == {1: "host", 2: "host", 3: "storage", 101: "fabric", 102: "fabric"}
    assert roles["sp1"] == {1: "fabric", 2: "fabric"}


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_shipped_topology_files_are_what_the_generators_write(name):
    assert (LAYOUTS / f"{name}.json").read_text() == GENERATORS[name]().dumps()
    assert load_topology(name) == GENERATORS[name]()


def test_a_topology_file_of_ones_own_builds_the_plan(tmp_path):
    path = tmp_path / "line.json"
    spec = star(2).to_json() | {"switches": [{"name": "a", "device_id": 1}, {"name": "b", "device_id": 2}],
                                "links": [{"node1": "h1", "node2": "a", "port2": 1},
                                          {"node1": "a", "port1": 9, "node2": "b", "port2": 9},
                                          {"node1": "h2", "node2": "b", "port2": 1},
                                          {"node1": "st1", "node2": "b", "port2": 2}]}
    path.write_text(json.dumps(spec))
    plan = plan_of(KvTopo(load_topology(path)))
    assert routes(plan, "a") == {"h1": 1, "h2": 9, "st1": 9} and routes(plan, "b") == {"h1": 9, "h2": 1, "st1": 2}


@pytest.mark.parametrize(("change", "message"), [
    ({"links": [{"node1": "h1", "node2": "s9", "port2": 1}]}, r"links\[0\] names 's9'"),
    ({"links": [{"node1": "h1", "node2": "s1"}]}, r"links\[0\]: the port of switch s1 must be a number"),
    ({"links": [{"node1": "h1", "node2": "s1", "port2": 1}, {"node1": "h2", "node2": "s1", "port2": 1}]},
     "port 1 of s1 is used twice"),
    ({"switches": [{"name": "s1"}]}, "lacks a field"),
    ({"storage": []}, "1..8 storage nodes"),
    ({"extra": 1}, "unknown keys"),
])
def test_a_wrong_topology_file_is_refused_naming_file_and_item(tmp_path, change, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(star(2).to_json() | change))
    with pytest.raises(TopologyError, match=f"bad.json: .*{message}"):
        load_topology(path)


def test_a_host_count_with_a_topology_file_is_refused(tmp_path):
    with pytest.raises(TopologyError, match="a topology file lists its hosts"):
        load_topology(tmp_path / "x.json", hosts=3)


def test_the_controller_reads_our_hosts_json(tmp_path):
    from controller.hosts import load_hosts

    sw = plan_of(KvTopo(star(3))).switches[0]
    hosts = load_hosts(sw.write_hosts_file(tmp_path / "hosts.json"))
    assert [(h.name, h.ip, h.mac, h.port) for h in hosts] == [(r.name, r.ip, r.mac, r.port) for r in sw.routes]


def switch_path(topo, plan, source: str, target: str) -> list[str]:
    """The switches a packet from endpoint `source` to endpoint `target` crosses, hop by hop along the plan."""
    routes_of = {sw.name: {r.name: r.port for r in sw.routes} for sw in plan.switches}
    peer_at = {}
    for a, b in topo.links():
        pa, pb = topo.port(a, b)
        peer_at[(a, pa)], peer_at[(b, pb)] = b, a
    node = next(peer for (me, _), peer in peer_at.items() if me == source and peer in routes_of)
    path = [node]
    while (node := peer_at[(node, routes_of[node][target])]) != target:
        assert node in routes_of and len(path) < len(routes_of), f"{source} → {target} loops: {path}"
        path.append(node)
    return path


@pytest.mark.parametrize("topo", [KvTopo(star(3)), KvTopo(leaf_spine(4)), KvTopo(leaf_spine(7, leaves=3))])
def test_storage_replies_retrace_the_request_path_so_every_switch_that_counted_a_miss_can_fill(topo):
    plan = plan_of(topo)
    for host in plan.inference_hosts:
        request = switch_path(topo, plan, host.name, plan.storage.name)
        assert switch_path(topo, plan, plan.storage.name, host.name) == request[::-1]
