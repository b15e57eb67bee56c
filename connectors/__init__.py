"""How LLM engines use the pool: keys, block format and pool clients for KV connectors (docs/engines.md).

* `identity`: a model's identity (`ModelIdentity`) and the chained prefix hashes that key its blocks.
* `blockcodec`: a pool block's header (magic, format, identity, key, length, checksum); refuses anything else.
* `breaker`: the circuit breaker that keeps a down or slow pool out of the engine's way.
* `store`: `PoolStore`, what a connector calls (leading hits in one round trip, get, put, counters).
* `fetch`: a request's blocks read side by side by a few `PoolStore`s.
* `saver`: blocks written by a child process, so the engine never waits for (or shares its GIL with) writes.
* `plan`: the scheduler side of a connector, engine-neutral (what each request loads and saves, step by step).
* `options`: a connector's settings as the engine's config gives them, checked.
* `kvlayout`: a pool block's payload gathered from / scattered into an engine's paged caches (torch, numpy).
* `vllm`: `KVSwitchConnector`, a vLLM v1 KV connector.
* `presets` / `models`: model configs in the repo and their weights generated from a seed (never downloaded).
* `engine_run`: prompts through one fresh vLLM engine, with or without the pool (tests, benchmarks).

Importing the package imports nothing of vLLM, torch or the P4 side; `kvlayout`, `vllm`, `models` and
`engine_run` need the engine environment (`.venv-engine`), the others only the standard library and `kvpool`.
"""
