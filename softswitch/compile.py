"""`python -m softswitch.compile PROG.p4 -o OUTDIR --p4runtime-files OUT.p4info.txtpb`: p4c's interface for
the embedded target.

Writes what p4c writes for BMv2, under the same names, so build scripts only change the compiler's name:
`OUTDIR/PROG.json` is the device config `SetForwardingPipelineConfig` takes (here a JSON bundle of the P4
sources, see `softswitch.p4runtime.device_config`), and each `--p4runtime-files` path gets the P4Info in the
format its suffix names (`.txt`/`.txtpb` text, `.json` JSON, `.bin`/`.pb` binary).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from dataclasses import dataclass

from google.protobuf import json_format
from p4.config.v1 import p4info_pb2

from softswitch.p4runtime import device_config, p4info


class CompileError(Exception):
    """The program does not compile; the message is `file:line:col: message` when the front end knows it."""


@dataclass(frozen=True)
class Compiled:
    p4info: p4info_pb2.P4Info
    device_config: bytes
    program: object
    """The front end's `ir.Program`."""


def load_ir(path: pathlib.Path):
    """Run the front end; its errors become `CompileError` with the front end's `file:line:col: msg`."""
    from softswitch import frontend
    from softswitch.frontend.errors import P4Error

    if not path.is_file():
        raise CompileError(f"{path}: no such file")
    try:
        return frontend.load_program(path)
    except P4Error as e:  # prints as file:line:col: message
        raise CompileError(str(e)) from None
    except RecursionError:
        raise CompileError(f"{path}: program nests too deeply for the front end") from None


def p4info_of(program) -> p4info_pb2.P4Info:
    from softswitch.p4runtime.from_ir import SchemaError, program_schema

    try:
        return p4info.build_p4info(program_schema(program))
    except (SchemaError, p4info.P4InfoError) as e:
        raise CompileError(str(e)) from None


def compile_program(path: pathlib.Path) -> Compiled:
    program = load_ir(path)
    return Compiled(p4info_of(program), device_config.bundle(path), program)


def write_p4info(info: p4info_pb2.P4Info, out: pathlib.Path) -> None:
    suffix = out.suffix.lower()
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".json",):
        out.write_text(json_format.MessageToJson(info))
    elif suffix in (".bin", ".pb"):
        out.write_bytes(info.SerializeToString())
    else:
        out.write_text(p4info.to_text(info))


def arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m softswitch.compile",
                                 description="Compile a P4_16 v1model program for the embedded softswitch target "
                                             "(p4c-compatible flags).")
    ap.add_argument("program", type=pathlib.Path, help="the P4 program")
    ap.add_argument("-o", "--output", type=pathlib.Path, default=pathlib.Path("."),
                    help="output folder for PROG.json (the device config)")
    ap.add_argument("--p4runtime-files", default="",
                    help="comma-separated P4Info output files (.txt/.txtpb, .json, .bin)")
    ap.add_argument("--p4runtime-format", choices=("text", "json", "binary"),
                    help="accepted for p4c compatibility; the suffix decides the format")
    ap.add_argument("--target", default="bmv2", help="accepted for p4c compatibility (bmv2)")
    ap.add_argument("--arch", default="v1model", help="only v1model")
    ap.add_argument("--std", default="p4-16", help="only p4-16")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    if args.arch != "v1model" or args.std not in ("p4-16", "p4_16"):
        print(f"error: only --arch v1model and --std p4-16 are supported (got {args.arch}, {args.std})",
              file=sys.stderr)
        return 2
    try:
        compiled = compile_program(args.program)
    except (CompileError, device_config.DeviceConfigError) as e:
        print(e, file=sys.stderr)
        return 1
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / f"{args.program.stem}.json").write_bytes(compiled.device_config)
    for name in filter(None, (s.strip() for s in args.p4runtime_files.split(","))):
        write_p4info(compiled.p4info, pathlib.Path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
