"""Suite-wide pytest settings: markers are declared in pyproject.toml; nothing global lives here.

`tests/connectors/` runs in the engine environment (`.venv-engine`: torch, vLLM), which `make test` runs
separately; the main environment does not collect it (its modules import torch and vLLM).
"""

from importlib.util import find_spec

collect_ignore = [] if find_spec("vllm") is not None else ["connectors"]
