"""A small STF-like script format (in the spirit of p4c's .stf tests) and its runner against a SoftSwitch.

One command per line; `#` starts a comment. Numbers are decimal or 0x-hex. Key fields and actions use the
P4Info names (`hdr.ipv4.dst_addr`, `MyIngress.fwd`).

    add <table> [<key>:<match> ...] <action>([<param>:<value>, ...]) [priority <n>]
        <match> by the key's match kind: exact/optional `v`; lpm `v/len` (`v` alone: full length);
        ternary `v&&&mask` (`v` alone: all bits); range `lo..hi`; `*` leaves the field out (wildcard)
    setdefault <table> <action>([<param>:<value>, ...])
    mcast <group> <port>[:<rid>] ...
    clone <session> <port>[:<rid>] ... [truncate <n>]
    register_write <register> <index> <value>
    value_set <name> <value>[&&&<mask>] ...   replace a parser value_set's members
    packet <port> <hex bytes>          run one packet; its outputs must equal the `expect` lines after it
    expect <port> <hex bytes>          (as a multiset; no `expect` after a packet means it is dropped)
    check_register <register> <index> <value>
    check_counter <counter> <index> packets <n> bytes <n>
    digest <Name> [<field>:<value> ...]   the next digest drained must be this one
    no_digest                              no digest is pending
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from softswitch.runtime.switch import SoftSwitch
from softswitch.target import Exact, Lpm, OptionalMatch, Range, Replica, TableEntry, Ternary


def _int(text: str) -> int:
    return int(text, 0)


def _hex(parts: list[str]) -> bytes:
    return bytes.fromhex("".join(parts))


@dataclass
class PacketCase:
    line: int
    port: int
    data: bytes
    expected: list[tuple[int, bytes]] = field(default_factory=list)


class StfFailure(AssertionError):
    pass


def _match_for(sw: SoftSwitch, table: str, key: str, text: str):
    t = sw.table(table)
    kf = next((k for k in t.keys if k.name == key), None)
    if kf is None:
        raise StfFailure(f"table {table} has no key {key} (keys: {[k.name for k in t.keys]})")
    full = (1 << kf.width) - 1
    kind = kf.match_kind
    if kind == "exact":
        return Exact(_int(text))
    if kind == "optional":
        return OptionalMatch(_int(text))
    if kind == "lpm":
        if "/" in text:
            v, plen = text.split("/")
            return Lpm(_int(v), int(plen))
        return Lpm(_int(text), kf.width)
    if kind == "ternary":
        if "&&&" in text:
            v, m = text.split("&&&")
            return Ternary(_int(v), _int(m))
        return Ternary(_int(text), full)
    if kind == "range":
        if ".." in text:
            lo, hi = text.split("..")
            return Range(_int(lo), _int(hi))
        return Range(_int(text), _int(text))
    raise StfFailure(f"match kind {kind}")


_ACTION = re.compile(r"^([\w.]+)\((.*)\)$")


def _action(text: str) -> tuple[str, dict[str, int]]:
    m = _ACTION.match(text)
    if not m:
        raise StfFailure(f"bad action call {text!r}")
    params = {}
    for part in filter(None, (p.strip() for p in m.group(2).split(","))):
        name, value = part.split(":")
        params[name.strip()] = _int(value.strip())
    return m.group(1), params


def _is_key(tok: str) -> bool:
    """`name:value` with balanced parentheses and a plain value (`hdr.h.isValid():1`, `hdr.x[7:4]:3`)."""
    value = tok.rpartition(":")[2]
    return ":" in tok and "(" not in value and ")" not in value and tok.count("(") == tok.count(")")


def _split_action(tokens: list[str]) -> tuple[list[str], str, list[str]]:
    """Split `add` tokens into key tokens, the action call (which may contain spaces) and the rest."""
    for i, tok in enumerate(tokens):
        if "(" in tok and not _is_key(tok):
            j = i
            call = tok
            while not call.endswith(")"):
                j += 1
                call += " " + tokens[j]
            return tokens[:i], call, tokens[j + 1:]
    raise StfFailure("add: no action call")


def run_stf(sw: SoftSwitch, path: Path) -> int:
    """Run a script; returns the number of packets checked. Raises StfFailure naming the line on mismatch."""
    pending: PacketCase | None = None
    checked = 0

    def flush() -> None:
        nonlocal pending, checked
        if pending is None:
            return
        got = sw.process(pending.port, pending.data)
        if sorted(got) != sorted(pending.expected):
            raise StfFailure(
                f"{path.name}:{pending.line}: packet on port {pending.port}\n"
                f"  expected: {[(p, d.hex()) for p, d in pending.expected]}\n"
                f"  got:      {[(p, d.hex()) for p, d in got]}")
        checked += 1
        pending = None

    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        cmd, *args = line.split()
        try:
            if cmd == "expect":
                if pending is None:
                    raise StfFailure("expect without a packet")
                pending.expected.append((_int(args[0]), _hex(args[1:])))
                continue
            flush()
            if cmd == "packet":
                pending = PacketCase(lineno, _int(args[0]), _hex(args[1:]))
            elif cmd == "add":
                table = args[0]
                keys, call, rest = _split_action(args[1:])
                match = {}
                for kv in keys:
                    k, _, v = kv.rpartition(":")
                    if v != "*":
                        match[k] = _match_for(sw, table, k, v)
                action, params = _action(call)
                priority = _int(rest[1]) if rest[:1] == ["priority"] else 0
                sw.table_insert(TableEntry(table, match, action, params, priority))
            elif cmd == "setdefault":
                action, params = _action(" ".join(args[1:]))
                sw.table_set_default(args[0], action, params)
            elif cmd in ("mcast", "clone"):
                truncate = 0
                if "truncate" in args:
                    i = args.index("truncate")
                    truncate = _int(args[i + 1])
                    args = args[:i]
                replicas = []
                for r in args[1:]:
                    port, _, rid = r.partition(":")
                    replicas.append(Replica(_int(port), _int(rid) if rid else 0))
                if cmd == "mcast":
                    sw.mcast_group_set(_int(args[0]), replicas)
                else:
                    sw.clone_session_set(_int(args[0]), replicas, truncate)
            elif cmd == "value_set":
                members = []
                for m in args[1:]:
                    v, _, mask = m.partition("&&&")
                    members.append((_int(v), _int(mask) if mask else -1))
                sw.value_set_set(args[0], members)
            elif cmd == "register_write":
                sw.register_write(args[0], _int(args[1]), _int(args[2]))
            elif cmd == "check_register":
                got = sw.register_read(args[0], _int(args[1]))
                if got != _int(args[2]):
                    raise StfFailure(f"register {args[0]}[{args[1]}] = {got:#x}, expected {args[2]}")
            elif cmd == "check_counter":
                got = sw.counter_read(args[0], _int(args[1]))
                want = (_int(args[3]), _int(args[5]))
                if got != want:
                    raise StfFailure(f"counter {args[0]}[{args[1]}] = {got}, expected {want}")
            elif cmd == "digest":
                digests = sw.drain_digests()
                want = (args[0], tuple((k, _int(v)) for k, v in (a.split(":") for a in args[1:])))
                got = [(d.name, d.fields) for d in digests]
                if got[:1] != [want]:
                    raise StfFailure(f"digests {got}, expected first {want}")
            elif cmd == "no_digest":
                got = sw.drain_digests()
                if got:
                    raise StfFailure(f"unexpected digests {got}")
            else:
                raise StfFailure(f"unknown command {cmd}")
        except StfFailure as exc:
            if str(exc).startswith(path.name):
                raise
            raise StfFailure(f"{path.name}:{lineno}: {exc}") from None
    flush()
    return checked
