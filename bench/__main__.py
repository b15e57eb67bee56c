"""Run benchmarks: `python -m bench all --out out/bench` or `python -m bench NAME [NAME ...] [--quick]`.

Timing goals live here, never in tests. Every benchmark writes its own JSON and markdown table; this runner
adds `summary.md` that concatenates the tables of the ones it ran.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path

import bench


def available() -> list[str]:
    """Benchmark modules present in this checkout (every module of the package with a `run`)."""
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    names = available()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", metavar="NAME", help=f"'all' or some of: {', '.join(names)}")
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="output folder (default out/bench)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    chosen = names if args.names == ["all"] else args.names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}")
    args.out.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        started = time.perf_counter()
        print(f"== bench {name}", flush=True)
        try:
            module.run(args.out, quick=args.quick)
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            print(f"bench {name} failed: {exc!r}", file=sys.stderr)
            failed.append(name)
            continue
        print(f"   done in {time.perf_counter() - started:.1f} s", flush=True)
    tables = [
        f"## {name}\n\n{(args.out / f'{name}.md').read_text()}"
        for name in chosen
        if (args.out / f"{name}.md").exists()
    ]
    (args.out / "summary.md").write_text("# Benchmarks\n\n" + "\n\n".join(tables))
    print(f"summary: {args.out / 'summary.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
