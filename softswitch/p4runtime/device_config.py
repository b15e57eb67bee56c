"""The `p4_device_config` of this target: a self-contained JSON bundle of the program's source files.

BMv2 takes its JSON; we take the P4 sources themselves (the embedded target compiles on load), bundled with
every local `#include` they reach, so a switch started with `--no-p4` can load a program it has never seen:

    {"format": "softswitch-p4-bundle/1", "main": "prog.p4", "sources": {"prog.p4": "...", "inc/h.p4": "..."}}

System includes (`<core.p4>`, `<v1model.p4>`) are the front end's own and are not bundled.
"""

from __future__ import annotations

import json
import pathlib
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from softswitch.target import Target

FORMAT = "softswitch-p4-bundle/1"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


class DeviceConfigError(ValueError):
    """The device config is not a bundle, or its program does not load (message: `file:line:col: ...`)."""


def bundle(program: pathlib.Path) -> bytes:
    """Collect `program` and its local includes (relative to the including file) into one bundle."""
    program = program.resolve()
    root = program.parent
    sources: dict[str, str] = {}
    todo = [program]
    while todo:
        path = todo.pop()
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = path.as_posix().lstrip("/")  # an include outside the program's folder keeps its full path
        if rel in sources:
            continue
        try:
            text = path.read_text()
        except OSError as e:
            raise DeviceConfigError(f"{path}: cannot read: {e.strerror}") from None
        sources[rel] = text
        for inc in _INCLUDE.findall(text):
            candidate = (path.parent / inc).resolve()
            if candidate.exists():
                todo.append(candidate)
    return json.dumps({"format": FORMAT, "main": program.name, "sources": sources},
                      sort_keys=True).encode()


def unbundle(data: bytes, into: pathlib.Path) -> pathlib.Path:
    """Write the bundle's files under `into`; returns the main program's path."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DeviceConfigError(f"device config is not a {FORMAT} JSON bundle: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("sources"), dict):
        raise DeviceConfigError(f"device config is not a {FORMAT} bundle (is it a BMv2 JSON?)")
    into = into.resolve()
    for rel, text in doc["sources"].items():
        path = (into / rel).resolve()
        if into not in path.parents or not isinstance(text, str):
            raise DeviceConfigError(f"device config: bad source entry {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    main = (into / str(doc.get("main", ""))).resolve()
    if not main.is_file() or into not in main.parents:
        raise DeviceConfigError("device config: 'main' does not name one of its sources")
    return main


@dataclass(frozen=True)
class Loaded:
    target: Target
    program: object | None = None
    """The front end's program (IR), when the loader has one: used to check a P4Info against it."""


Loader = Callable[[bytes, "int | None"], Loaded]


def target_for(program, cpu_port: int | None) -> Loaded:
    """The executor for an already checked `ir.Program`."""
    try:
        from softswitch.runtime import SoftSwitch
    except ImportError:  # the package may not re-export it
        from softswitch.runtime.switch import SoftSwitch

    from softswitch.frontend.errors import P4Error

    try:
        return Loaded(SoftSwitch.load(program, cpu_port=cpu_port), program)
    except P4Error as e:  # a construct the executor refuses, with its location
        raise DeviceConfigError(str(e)) from None
    except Exception as e:  # the executor's own limits: reported, never a crash of the server
        raise DeviceConfigError(f"the executor cannot run this program: {type(e).__name__}: {e}") from None


def load_bundle(data: bytes, cpu_port: int | None) -> Loaded:
    """The real loader: unbundle into a temporary folder, run the front end, build the executor."""
    from softswitch import frontend  # imported here: the front end is heavy and optional for unit tests
    from softswitch.frontend.errors import P4Error

    with tempfile.TemporaryDirectory(prefix="softswitch-") as tmp:
        main = unbundle(data, pathlib.Path(tmp))
        try:
            program = frontend.load_program(main)
        except P4Error as e:  # file:line:col: message, shown relative to the bundle
            raise DeviceConfigError(str(e).replace(str(pathlib.Path(tmp).resolve()) + "/", "")) from None
        except RecursionError:
            raise DeviceConfigError("program nests too deeply for the front end") from None
        return target_for(program, cpu_port)
