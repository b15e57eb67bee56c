"""The controller's local API: JSON over HTTP on 127.0.0.1, what the CLI (and scripts, tests) talk to.

The controller is the only P4Runtime primary; everything an operator does goes through here.

    GET    /status                 controller, switch and pool summary
    GET    /blocks[?all=1][&key=K] residents (all=1: every tracked chunk; key: of one block or chunk)
    GET    /blocks/KEY             one block (TENANT:PREFIX, every chunk) or chunk (TENANT:PREFIX:CHUNK)
    POST   /pins {key, ttl, force} pin a block's chunks or one chunk (ttl null = hard; unknown keys need force)
    DELETE /pins/KEY               unpin
    POST   /evict     {key}        evict now (a block: every cached chunk)
    POST   /tiers     {key, tier}  storage node: move to "dram" or "disk" (TIER_MOVE)
    GET    /stats                  metrics snapshot
    GET    /trace                  per-stage times of the recent hot-digest admissions (monotonic clock)
    GET    /decisions?limit=N      recent decisions with reasons
    GET    /policy                 policies in force
    POST   /policy    {kind, name, params}
    GET    /slots/N                read slot N back from the switch (SLOT_READ)
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from controller.blocks import BlockOps
from controller.metrics import Metrics
from controller.pool import PinError, PoolManager
from kvpool.keys import BlockKey, ChunkKey, parse_key
from p4rt.errors import P4RuntimeError

log = logging.getLogger(__name__)


class Backend(Protocol):
    """What the API serves from (the `Controller`; a light stand-in in unit tests)."""

    pool: PoolManager
    metrics: Metrics

    def status(self) -> dict: ...
    def policy_view(self) -> dict: ...
    def set_policy(self, kind: str, name: str, params: dict[str, str]) -> dict: ...
    def read_slot(self, slot: int) -> dict: ...
    def move_tier(self, key: ChunkKey, tier_name: str) -> dict: ...


class ApiError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _key(text: str) -> ChunkKey:
    try:
        return ChunkKey.parse(unquote(text))
    except ValueError as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, str(exc)) from None


def _any_key(text: str) -> BlockKey | ChunkKey:
    """A block (`TENANT:PREFIX`) or a chunk (`TENANT:PREFIX:CHUNK`)."""
    try:
        return parse_key(unquote(text))
    except ValueError as exc:
        raise ApiError(HTTPStatus.BAD_REQUEST, str(exc)) from None


def _routes(backend: Backend, method: str, path: str, query: dict[str, list[str]], body: dict) -> Any:
    parts = [p for p in path.split("/") if p]
    pool = backend.pool
    blocks = BlockOps(pool)
    match method, parts:
        case "GET", ["status"]:
            return backend.status()
        case "GET", ["blocks"]:
            everything = query.get("all", ["0"])[0] in ("1", "true")
            if "key" in query:
                return blocks.rows(_any_key(query["key"][0]), everything)
            if everything:
                with pool.locked():
                    keys = list(pool.tracked)
                return pool.describe_many(keys)
            return pool.residents()
        case "GET", ["blocks", key]:
            try:
                return blocks.show(_any_key(key))
            except KeyError as exc:
                raise ApiError(HTTPStatus.NOT_FOUND, str(exc).strip("'\"")) from None
        case "POST", ["pins"]:
            ttl = body.get("ttl")
            if ttl is not None and (not isinstance(ttl, int | float) or ttl <= 0):
                raise ApiError(HTTPStatus.BAD_REQUEST, f"ttl must be a positive number of seconds, got {ttl!r}")
            return blocks.pin(_any_key(str(body.get("key", ""))), ttl, force=bool(body.get("force")))
        case "DELETE", ["pins", key]:
            return blocks.unpin(_any_key(key))
        case "POST", ["evict"]:
            return blocks.evict(_any_key(str(body.get("key", ""))))
        case "POST", ["tiers"]:
            return backend.move_tier(_key(str(body.get("key", ""))), str(body.get("tier", "")))
        case "GET", ["stats"]:
            return backend.metrics.snapshot()
        case "GET", ["trace"]:
            return backend.metrics.traces()
        case "GET", ["decisions"]:
            return pool.recent_decisions(int(query.get("limit", ["50"])[0]))
        case "GET", ["policy"]:
            return backend.policy_view()
        case "POST", ["policy"]:
            params = body.get("params") or {}
            if not isinstance(params, dict):
                raise ApiError(HTTPStatus.BAD_REQUEST, "params must be an object of name: value")
            return backend.set_policy(str(body.get("kind", "")), str(body.get("name", "")),
                                      {str(k): str(v) for k, v in params.items()})
        case "GET", ["slots", slot]:
            try:
                number = int(slot)
            except ValueError:
                raise ApiError(HTTPStatus.BAD_REQUEST, f"slot must be an integer, got {slot!r}") from None
            return backend.read_slot(number)
    raise ApiError(HTTPStatus.NOT_FOUND, f"no such endpoint: {method} {path}")


def handle(backend: Backend, method: str, target: str, body: bytes = b"") -> tuple[int, Any]:
    """One request → (HTTP status, JSON-ready body); every user error becomes a 4xx with a message."""
    url = urlsplit(target)
    try:
        data = json.loads(body) if body else {}
        if not isinstance(data, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
        return HTTPStatus.OK, _routes(backend, method, url.path, parse_qs(url.query), data)
    except ApiError as exc:
        return exc.status, {"error": exc.message}
    except json.JSONDecodeError as exc:
        return HTTPStatus.BAD_REQUEST, {"error": f"bad JSON body: {exc}"}
    except PinError as exc:
        return HTTPStatus.CONFLICT, {"error": str(exc)}
    except KeyError as exc:
        return HTTPStatus.NOT_FOUND, {"error": str(exc).strip("'\"")}
    except ValueError as exc:
        return HTTPStatus.BAD_REQUEST, {"error": str(exc)}
    except TimeoutError as exc:
        return HTTPStatus.GATEWAY_TIMEOUT, {"error": str(exc)}
    except P4RuntimeError as exc:
        return HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"switch: {exc}"}
    except Exception as exc:  # the API thread must answer, whatever broke underneath
        log.exception("API %s %s failed", method, target)
        return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}


class ApiServer:
    """A ThreadingHTTPServer in a daemon thread."""

    def __init__(self, backend: Backend, host: str = "127.0.0.1", port: int = 9090) -> None:
        self.backend = backend

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                status, payload = handle(backend, self.command, self.path, self.rfile.read(length) if length else b"")
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                log.debug("api: " + format, *args)

        # bound now, listening from `start`: the port is ours before the caller makes connections of its own (one
        # of which the kernel could give this very port), and nobody connects before the API serves
        self.httpd = ThreadingHTTPServer((host, port), Handler, bind_and_activate=False)
        try:
            self.httpd.server_bind()
        except BaseException:
            self.httpd.server_close()
            raise
        self.httpd.daemon_threads = True
        self.httpd.timeout = 0.5  # a connection gone between the loop's look and the accept does not hold it
        self.address = self.httpd.server_address
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="ctl-api", daemon=True)

    def start(self) -> None:
        self.httpd.server_activate()
        self._thread.start()

    def _serve(self) -> None:
        """Requests as they come, until a byte on the wake-up pipe: no periodic poll, so an idle API never wakes
        (socketserver's `serve_forever` looks for a shutdown every `poll_interval`)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.httpd, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _events in selector.select():
                    if key.fileobj == self._wake_r:
                        return
                    self.httpd.handle_request()

    def stop(self) -> None:
        """Stop serving at once (the loop is woken through its pipe) and free the port; a second call does nothing."""
        if self._wake_w < 0:
            return
        os.write(self._wake_w, b"x")
        if self._thread.is_alive():
            self._thread.join(5)
        self.httpd.server_close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._wake_r = self._wake_w = -1
