"""`python -m controller <command>`: the operator's CLI, a thin client of the controller's local JSON API."""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kvpool.keys import BlockKey, ChunkKey, parse_key

DEFAULT_API = "127.0.0.1:9090"
SORT_FIELDS = ("slot", "key", "tenant", "hits", "age", "score", "tier", "pin")


class CliError(Exception):
    """Something the user can fix: printed as one line, exit status 1."""


class ApiClient:
    def __init__(self, address: str, timeout: float = 10.0) -> None:
        self.base = f"http://{address}"
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except (ValueError, AttributeError):
                message = exc.reason
            raise CliError(str(message)) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            raise CliError(f"cannot reach the controller API at {self.base} ({getattr(exc, 'reason', exc)}); "
                           "is `python -m controller serve` running? (--api / KVSWITCH_API)") from None


# ---- argument types: bad input is a usage error, not a traceback -----------------------------------------

def key_arg(text: str) -> BlockKey | ChunkKey:
    """A block `TENANT:PREFIXHASH_HEX` (all its chunks) or one chunk `TENANT:PREFIXHASH_HEX:CHUNK`."""
    try:
        return parse_key(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def chunk_arg(text: str) -> ChunkKey:
    try:
        return ChunkKey.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def slot_arg(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"slot must be an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"slot must be ≥ 0, got {value}")
    return value


def param_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def common_options() -> argparse.ArgumentParser:
    """--api and --json, accepted after the subcommand too (`ls --json`)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--api", default=argparse.SUPPRESS, help="controller API host:port")
    parent.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="JSON output")
    return parent


def add_client_commands(sub: argparse._SubParsersAction) -> None:
    """The CLI's subcommands (serve is added by __main__)."""
    parent = common_options()
    real_add = sub.add_parser

    def add_parser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return real_add(name, parents=[parent], **kwargs)

    sub.add_parser = add_parser  # type: ignore[method-assign]  # every client command takes --api/--json after it
    sub.add_parser("status", help="controller, switch and pool summary")
    ls = sub.add_parser("ls", help="cached chunks in the switch pool")
    ls.add_argument("--sort", choices=SORT_FIELDS, default="slot", help="sort column (default slot)")
    ls.add_argument("--reverse", "-r", action="store_true", help="descending order")
    ls.add_argument("--limit", "-n", type=int, default=None,
                    help="show at most N rows (table default 100, since a rich table of 10k rows takes seconds; "
                         "0 = all; --json default all)")
    ls.add_argument("--all", action="store_true", help="every tracked chunk, candidates included")
    ls.add_argument("key", type=key_arg, nargs="?", default=None, help="only this block (or chunk)")
    key_help = "a block TENANT:PREFIXHASH_HEX (all its chunks) or one chunk TENANT:PREFIXHASH_HEX:CHUNK"
    show = sub.add_parser("show", help="everything known about a block (each chunk) or one chunk")
    show.add_argument("key", type=key_arg, help=key_help)
    pin = sub.add_parser("pin", help="keep a block's chunks (or one chunk) in the switch pool (hard, or soft --ttl)")
    pin.add_argument("key", type=key_arg, help=key_help)
    pin.add_argument("--ttl", type=positive_float, default=None, help="soft pin lasting this many seconds")
    pin.add_argument("--force", action="store_true", help="pin even if the storage node does not hold it")
    unpin = sub.add_parser("unpin", help="remove the pins of a block's chunks (or of one chunk)")
    unpin.add_argument("key", type=key_arg, help=key_help)
    evict = sub.add_parser("evict", help="evict a block's cached chunks (or one chunk) now (recycled by policy)")
    evict.add_argument("key", type=key_arg, help=key_help)
    tier = sub.add_parser("tier", help="promote/demote a chunk between the storage node's DRAM and disk")
    tier.add_argument("key", type=chunk_arg)
    tier.add_argument("tier", choices=("dram", "disk"))
    stats = sub.add_parser("stats", help="hit ratio, occupancy, admissions, evictions, latency")
    stats.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    stats.add_argument("--interval", type=positive_float, default=1.0, help="seconds between refreshes")
    policy = sub.add_parser("policy", help="show or set the admission / eviction / recycling policy")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True, metavar="show|set")
    policy_sub.add_parser("show", help="policies in force")
    policy_set = policy_sub.add_parser(
        "set", help="replace one policy: policy set [KIND] NAME [k=v ...] (KIND when NAME is ambiguous)")
    policy_set.add_argument("words", nargs="+", metavar="[KIND] NAME [k=v ...]")
    read_slot = sub.add_parser("read-slot", help="read a slot back from the switch (SLOT_READ)")
    read_slot.add_argument("slot", type=slot_arg)
    decisions = sub.add_parser("log", help="recent decisions with their reasons")
    decisions.add_argument("--limit", "-n", type=int, default=30)
    sub.add_parser = real_add  # type: ignore[method-assign]


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", default=os.environ.get("KVSWITCH_API", DEFAULT_API),
                        help=f"controller API host:port (default {DEFAULT_API}, env KVSWITCH_API)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


# ---- rendering -------------------------------------------------------------------------------------------

def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def sort_rows(rows: list[dict], field: str, reverse: bool) -> list[dict]:
    def key(row: dict):
        value = {"key": row["key"], "tier": ",".join(row["tiers"]), "pin": row["pin"] or ""}.get(field, row.get(field))
        return (value is None, value if value is not None else 0)

    return sorted(rows, key=key, reverse=reverse)


def render_blocks(console: Console, rows: list[dict]) -> None:
    table = Table(title=f"switch pool: {len(rows)} chunk(s)")
    for column in ("tenant", "prefix hash", "chunk", "slot", "version", "hits", "age s", "score", "tiers", "pin"):
        table.add_column(column, justify="right" if column in {"chunk", "slot", "version", "hits", "age s", "score"}
                         else "left", no_wrap=column in {"prefix hash", "tiers"})
    for row in rows:
        pin = row["pin"] or ""
        if row.get("pin_expires_in") is not None:
            pin += f" ({row['pin_expires_in']:.0f}s)"
        table.add_row(str(row["tenant"]), row["prefix_hash"], str(row["chunk"]), _fmt(row["slot"]),
                      _fmt(row.get("version") or None), str(row["hits"]),
                      _fmt(row["age"]), _fmt(row["score"], 3), ",".join(row["tiers"]), pin)
    console.print(table)


def render_mapping(console: Console, title: str, data: dict) -> None:
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value")
    for name, value in data.items():
        table.add_row(name, json.dumps(value) if isinstance(value, dict | list) else _fmt(value, 3))
    console.print(table)


def _chunks_note(data: dict) -> str:
    chunks = data.get("chunks") or []
    if len(chunks) == 1 and chunks[0] == data["key"]:
        return ""
    note = f": {len(chunks)} chunk(s)"
    if data.get("orphans_evicted"):
        note += f"; evicted {len(data['orphans_evicted'])} orphan chunk(s) beyond its {data['chunk_count']}"
    return note


def render_show(console: Console, title: str, data: dict) -> None:
    if "chunks" not in data:  # one chunk
        render_mapping(console, title, data)
        return
    summary = {k: v for k, v in data.items() if k != "chunks"}
    render_mapping(console, f"block {title}", summary)
    render_blocks(console, data["chunks"])


def render_evict(console: Console, data: dict) -> None:
    if "outcome" in data:
        console.print(f"evicted {data['key']} from slot {data['slot']}: {data['outcome']['action']} "
                      f"({data['outcome']['reason']})")
    else:
        console.print(f"evicted {len(data['chunks'])} chunk(s) of {data['key']} from slots {data['slots']}")


def render_stats(console: Console, stats: dict) -> None:
    ratio = stats["hit_ratio"]
    hot = stats["hot_to_first_hit"]
    rows = {
        "occupancy": f"{stats['occupancy']} / {stats['capacity']} slots",
        "GETs switch / server": f"{stats['gets']['switch']} / {stats['gets']['server']}",
        "hit ratio switch": "-" if ratio["switch"] is None else f"{ratio['switch']:.1%}",
        "admissions": f"{stats['admissions_total']} {stats['admissions']}",
        "evictions": f"{stats['evictions_total']} {stats['evictions']}",
        "demoted / dropped": f"{stats['demotions']} / {stats['drops']}",
        "refusals": json.dumps(stats["refusals"]),
        "digests (rate/s)": f"{stats['digests']} ({stats['digest_rate']:.2f}/s)",
        "digest → first hit": "-" if not hot["count"] else
        f"p50 {hot['p50_ms']:.1f} ms, p99 {hot['p99_ms']:.1f} ms (n={hot['count']})",
        "client requests": json.dumps(stats["client_requests"]),
        "ignored": json.dumps(stats.get("ignored", {})),
        "over-slot (blocks)": f"{json.dumps(stats.get('over_slot', {}))} ({stats.get('over_slot_blocks', 0)})",
        "storage jobs": json.dumps(stats.get("storage_jobs", {})),
        "storage ports": "-" if stats.get("storage_ports") is None else str(stats["storage_ports"]),
    }
    for number, warning in enumerate(stats.get("warnings", []), 1):
        rows[f"WARNING {number}"] = warning
    render_mapping(console, "kvswitch controller", rows)


# ---- commands --------------------------------------------------------------------------------------------

def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Run one client command; raises CliError for problems the user can fix."""
    console = console or Console()
    api = ApiClient(args.api)

    def out(data: Any, render) -> None:
        if args.json:  # plain text: rich's JSON highlighting costs seconds on 10k rows
            console.file.write(json.dumps(data, indent=1) + "\n")
        else:
            render(data)

    command = args.command
    if command == "status":
        out(api.call("GET", "/status"), lambda d: render_mapping(console, "controller status", d))
    elif command == "ls":
        query = [("all", "1")] if args.all else []
        if args.key is not None:
            query.append(("key", str(args.key)))
        path = "/blocks" + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
        rows = sort_rows(api.call("GET", path), args.sort, args.reverse)
        limit = args.limit if args.limit is not None else (0 if args.json else 100)
        shown = rows[:limit] if limit > 0 else rows
        if args.json:
            out(shown, None)
        else:
            render_blocks(console, shown)
            if len(shown) < len(rows):
                console.print(f"… {len(rows) - len(shown)} more (--limit 0 shows all, --json for scripts)")
    elif command == "show":
        out(api.call("GET", f"/blocks/{args.key}"), lambda d: render_show(console, str(args.key), d))
    elif command == "pin":
        out(api.call("POST", "/pins", {"key": str(args.key), "ttl": args.ttl, "force": args.force}),
            lambda d: console.print(f"pinned {d['key']} ({d['kind']})" + _chunks_note(d)))
    elif command == "unpin":
        out(api.call("DELETE", f"/pins/{args.key}"), lambda d: console.print(f"unpinned {d['key']}" + _chunks_note(d)))
    elif command == "evict":
        out(api.call("POST", "/evict", {"key": str(args.key)}), lambda d: render_evict(console, d))
    elif command == "tier":
        out(api.call("POST", "/tiers", {"key": str(args.key), "tier": args.tier}),
            lambda d: console.print(f"{d['key']} now in {', '.join(d['tiers'])}"))
    elif command == "stats":
        while True:
            stats = api.call("GET", "/stats")
            if args.watch and not args.json:
                console.clear()
            out(stats, lambda d: render_stats(console, d))
            if not args.watch:
                break
            time.sleep(args.interval)
    elif command == "policy":
        if args.policy_command == "show":
            out(api.call("GET", "/policy"), lambda d: render_mapping(console, "policies", d))
        else:
            body = policy_request(args.words)
            out(api.call("POST", "/policy", body), lambda d: render_mapping(console, "policies", d))
    elif command == "read-slot":
        out(api.call("GET", f"/slots/{args.slot}"), lambda d: render_mapping(console, f"slot {args.slot}", d))
    elif command == "log":
        def render_log(rows: list[dict]) -> None:
            table = Table(title="recent decisions")
            for column in ("time", "action", "key", "slot", "score", "reason"):
                table.add_column(column)
            for row in rows:
                table.add_row(time.strftime("%H:%M:%S", time.localtime(row["at"])), row["action"], row["key"],
                              _fmt(row["slot"]), _fmt(row["score"], 3), row["reason"])
            console.print(table)

        out(api.call("GET", f"/decisions?limit={args.limit}"), render_log)
    else:  # pragma: no cover - argparse restricts commands
        raise CliError(f"unknown command {command}")
    return 0


POLICY_KINDS = ("admission", "eviction", "recycling")


def policy_request(words: list[str]) -> dict:
    """`[KIND] NAME [k=v ...]` → the /policy request body; kind "" lets the controller infer it from NAME."""
    kind = words[0] if words[0] in POLICY_KINDS else ""
    rest = words[1:] if kind else words
    if not rest or "=" in rest[0]:
        raise CliError("policy set: expected [KIND] NAME [k=v ...], e.g. `policy set eviction lru`")
    try:
        params = dict(param_arg(word) for word in rest[1:])
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"policy set: {exc}") from None
    return {"kind": kind, "name": rest[0], "params": params}


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path
