"""A local `mooncake_master` (Mooncake Store's master with its HTTP metadata server), for tests and the testbed.

    python -m kvpool.mooncake_master [--host 127.0.0.1] [--rpc-port 0] [--metadata-port 0] [--log FILE]
                                     [-- EXTRA_FLAGS...]

prints one JSON line with `master` (HOST:PORT) and `metadata` (URL), the two values `python -m kvpool.server
--backend mooncake --mooncake-master ... --mooncake-metadata ...` needs, then runs until SIGTERM / SIGINT.
Port 0 picks a free port. In Python, `with MooncakeMaster.start() as master: ...` does the same and stops the
master it started (only that process) on exit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

BINARY = "mooncake_master"
"""Installed by the `mooncake-transfer-engine-non-cuda` package into the venv's bin folder."""


def find_binary() -> str | None:
    """`mooncake_master` next to this Python (the venv, which may not be on PATH), else on PATH."""
    beside = Path(sys.executable).parent / BINARY
    return str(beside) if beside.exists() else shutil.which(BINARY)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free now on `host` (the OS picks it; another process could still take it before us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.2).close()
    except OSError:
        return False
    return True


@dataclass
class MooncakeMaster:
    """A running `mooncake_master` this process started."""

    process: subprocess.Popen[bytes]
    host: str
    rpc_port: int
    metadata_port: int
    metrics_port: int

    @property
    def master(self) -> str:
        """What `--mooncake-master` takes."""
        return f"{self.host}:{self.rpc_port}"

    @property
    def metadata(self) -> str:
        """What `--mooncake-metadata` takes."""
        return f"http://{self.host}:{self.metadata_port}/metadata"

    @classmethod
    def start(cls, host: str = "127.0.0.1", rpc_port: int = 0, metadata_port: int = 0,
              extra: tuple[str, ...] = (), log: IO[bytes] | None = None, timeout: float = 20.0,
              binary: str | None = None) -> MooncakeMaster:
        """Start a master and wait until its RPC and metadata ports answer. Raises FileNotFoundError when the
        binary is missing, RuntimeError when it exits or does not listen within `timeout` seconds."""
        path = binary or find_binary()
        if path is None:
            raise FileNotFoundError(f"{BINARY} not found: pip install mooncake-transfer-engine-non-cuda==0.3.13.post1")
        for _attempt in range(3):  # a port picked free can be taken before the master binds it: try again
            rpc, meta, metrics = rpc_port or free_port(host), metadata_port or free_port(host), free_port(host)
            argv = [path, "--enable_http_metadata_server=true", f"--http_metadata_server_host={host}",
                    f"--http_metadata_server_port={meta}", f"--rpc_address={host}", f"--rpc_port={rpc}",
                    f"--metrics_port={metrics}", *extra]
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log or subprocess.DEVNULL,
                                       stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                                       start_new_session=True)  # a Ctrl-C in a test run does not reach it
            running = cls(process, host, rpc, meta, metrics)
            deadline = time.monotonic() + timeout
            while process.poll() is None and time.monotonic() < deadline:
                if _listening(host, rpc) and _listening(host, meta):
                    return running
                time.sleep(0.05)
            running.stop()
            if rpc_port and metadata_port:
                break
        raise RuntimeError(f"{BINARY} did not start listening on {host} (exit code {process.returncode})")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the master (SIGTERM, then SIGKILL after `timeout` seconds); only this process."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> MooncakeMaster:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvpool.mooncake_master",
                                     description="run a local mooncake_master for kvpool's mooncake backend")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--rpc-port", type=int, default=0, help="master RPC port (default: a free one)")
    parser.add_argument("--metadata-port", type=int, default=0, help="HTTP metadata port (default: a free one)")
    parser.add_argument("--log", type=Path, help="append the master's own log (glog) to this file (default: none)")
    parser.add_argument("extra", nargs="*", help="further mooncake_master flags, after --")
    args = parser.parse_args(argv)
    log = args.log.open("ab") if args.log else None
    try:
        master = MooncakeMaster.start(args.host, args.rpc_port, args.metadata_port, tuple(args.extra), log=log)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"kvpool.mooncake_master: {exc}", file=sys.stderr)
        return 1
    finally:
        if log is not None:
            log.close()  # the master has its own descriptor
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(json.dumps({"master": master.master, "metadata": master.metadata, "pid": master.process.pid}), flush=True)
    with master:
        while not stop.is_set() and master.process.poll() is None:
            stop.wait(0.5)
    return 0 if stop.is_set() else 1  # 1: the master exited by itself


if __name__ == "__main__":
    sys.exit(main())
