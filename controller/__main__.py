"""`python -m controller serve ...` runs the control plane; every other command is the operator CLI."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from controller.cli import CliError, add_client_commands, add_common, existing_file, param_arg, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m controller",
                                     description="kvswitch control plane: serve, or talk to a running controller")
    add_common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the controller for one switch")
    serve.add_argument("--switch", required=True, help="P4Runtime address of the switch, HOST:PORT")
    serve.add_argument("--device-id", type=int, default=0)
    serve.add_argument("--api", default=argparse.SUPPRESS, help="local JSON API HOST[:PORT] to listen on (default 127.0.0.1:9090; port 0: any free port)")
    serve.add_argument("--election-id", type=int, default=1, help="our election id (highest is primary)")
    serve.add_argument("--p4info", type=existing_file, required=True, help="P4Info (text or binary)")
    serve.add_argument("--device-config", type=existing_file, required=True,
                       help="target device config: softswitch's, or BMv2's JSON from p4c")
    serve.add_argument("--storage", default=None, help="storage node HOST[:PORT] (TIER_MOVE, STAT, GET; port 1..65535, default 7420)")
    serve.add_argument("--state", type=Path, required=True, help="SQLite file for the slot map and pins")
    serve.add_argument("--hosts-file", type=existing_file, default=None,
                       help="host plan JSON: [{name, ip, mac, port}] → L3 routes")
    serve.add_argument("--metrics-port", type=int, default=None, help="Prometheus endpoint port on 127.0.0.1")
    serve.add_argument("--admission", default="value")
    serve.add_argument("--eviction", default="value")
    serve.add_argument("--recycling", default="residual")
    serve.add_argument("--param", action="append", type=param_arg, default=[], metavar="KIND.NAME=VALUE",
                       help="policy parameter, e.g. admission.threshold=0.5 (repeatable; model.* = shared reuse model)")
    serve.add_argument("--hot-threshold", type=int, default=3, help="GET misses per epoch that make a key hot")
    serve.add_argument("--epoch-seconds", type=float, default=10.0, help="sketch reset period")
    serve.add_argument("--insert-tenants", default=None, metavar="T[,T...]",
                       help="tenants allowed to INSERT (default all; 'none' = no one); others get ERR_DENIED")
    serve.add_argument("--pin-tenants", default=None, metavar="T[,T...]",
                       help="tenants allowed to ask for a pin with INSERT's F_PIN (default all; 'none' = no one)")
    serve.add_argument("--tenant-quota", action="append", default=[], metavar="TENANT=SLOTS",
                       help="switch slots one tenant may hold at most (repeatable)")
    serve.add_argument("--default-tenant-quota", type=int, default=None, metavar="SLOTS",
                       help="slot quota of tenants without --tenant-quota (default unlimited)")
    serve.add_argument("--coalesce-timeout-ms", type=float, default=200.0, metavar="MS",
                       help="lifetime of a coalesced GET in the data plane; 0 turns coalescing off (default 200, "
                            "below the clients' 500 ms retry)")
    serve.add_argument("--pool-address", default=None, metavar="IP",
                       help="one pool address clients send to, steered over the --pool-node storage nodes")
    serve.add_argument("--pool-node", action="append", default=[], metavar="ADDR[:PORT]",
                       help="a storage node of the pool (repeatable; node ids 1, 2, ... in this order); the "
                            "controller STATs it at ADDR:PORT every --pool-probe-seconds")
    serve.add_argument("--pool-shared-store", action="store_true",
                       help="the nodes share one store (mooncake): a down node's buckets go to a live node "
                            "(default: its blocks are answered MISS until it returns)")
    serve.add_argument("--pool-probe-seconds", type=float, default=1.0, metavar="S",
                       help="period of the storage nodes' health probes (default 1)")
    serve.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_client_commands(sub)
    return parser


def serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from controller.p4dataplane import DetectorOptions
    from controller.pool import PoolOptions
    from controller.service import Controller, ServeOptions
    from controller.tenants import TenantPolicy

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    params: dict[str, dict[str, str]] = {}
    for name, value in args.param:
        kind, dot, field = name.partition(".")
        if not dot or kind not in ("admission", "eviction", "recycling", "model"):
            parser.error(f"--param {name}={value}: expected admission|eviction|recycling|model.NAME=VALUE")
        params.setdefault(kind, {})[field] = value
    if args.coalesce_timeout_ms < 0:
        parser.error(f"--coalesce-timeout-ms {args.coalesce_timeout_ms}: must be >= 0")
    try:
        tenants = TenantPolicy.from_options(args.insert_tenants, args.pin_tenants, args.tenant_quota,
                                            args.default_tenant_quota)
    except ValueError as exc:
        parser.error(str(exc))
    steering = None
    if args.pool_address or args.pool_node:
        from controller.steering import SteeringOptions

        if not (args.pool_address and args.pool_node):
            parser.error("--pool-address and --pool-node go together")
        try:
            steering = SteeringOptions(
                args.pool_address, tuple(SteeringOptions.parse_node(t, i) for i, t in enumerate(args.pool_node, 1)),
                shared_store=args.pool_shared_store, probe_seconds=args.pool_probe_seconds)
        except ValueError as exc:
            parser.error(f"pool: {exc}")
    options = ServeOptions(
        switch=args.switch, device_id=args.device_id, election_id=args.election_id, p4info=args.p4info,
        device_config=args.device_config, storage=args.storage, state=args.state, api=args.api,
        hosts_file=args.hosts_file, metrics_port=args.metrics_port, admission=args.admission,
        eviction=args.eviction, recycling=args.recycling, policy_params=params,
        detector=DetectorOptions(args.hot_threshold, args.epoch_seconds), pool=PoolOptions(tenants=tenants),
        coalesce_timeout_us=int(args.coalesce_timeout_ms * 1000), steering=steering,
    )
    try:
        controller = Controller(options)
    except (ValueError, KeyError, OSError) as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 1
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupt)  # SIGTERM stops us even while still connecting
    try:
        controller.start()
        logging.getLogger("controller").info("serving %s; API on %s", args.switch, args.api)
        threading.Event().wait()
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        print(f"controller: cannot start: {exc}", file=sys.stderr)
        return 1
    finally:
        controller.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args, parser)
    try:
        return run(args)
    except CliError as exc:
        if args.json:  # scripts read one JSON document whatever happened
            print(json.dumps({"error": str(exc)}))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
