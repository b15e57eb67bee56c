"""Benchmarks: each module `bench/<name>.py` has `run(out_dir, quick=False) -> dict` and writes `<name>.json` and `<name>.md`."""
