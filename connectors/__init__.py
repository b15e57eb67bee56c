"""How LLM engines use the pool: keys, block format and a pool client for KV connectors (docs/engines.md).

* `identity`: a model's identity (`ModelIdentity`) and the chained prefix hashes that key its blocks.
* `blockcodec`: a pool block's header (magic, format, identity, length, checksum); refuses anything else.
* `breaker`: the circuit breaker that keeps a down or slow pool out of the engine's way.
* `store`: `PoolStore`, what a connector calls (leading hits in one round trip, get, put, counters).
* `presets` / `models`: model configs in the repo and their weights generated from a seed (never downloaded).
* `vllm`: `KVSwitchConnector`, a vLLM v1 KV connector (needs the engine environment, `.venv-engine`).

Importing the package imports nothing of vLLM, torch or the P4 side; only `vllm` and `models` need torch.
"""
