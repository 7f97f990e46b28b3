#!/usr/bin/env bash
# The Python package's tests: builds crates/lamina-py into a wheel with
# maturin, installs it into a virtualenv under the cargo target directory
# (target/py-venv) with the pinned tools of crates/lamina-py/
# requirements-dev.txt, and runs its pytest suite. Needs python3 >= 3.9
# with venv and pip; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
venv=$target/py-venv
wheels=$target/py-wheels
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r crates/lamina-py/requirements-dev.txt
"$venv/bin/python" -m pip install -q --disable-pip-version-check redis==8.1.0  # tests/test_redis_clients.py
# The wheel a user would install (release profile, abi3), not an editable
# build: the tests see exactly what `pip install` gives.
rm -rf "$wheels"
"$venv/bin/maturin" build --release --quiet -m crates/lamina-py/Cargo.toml \
    -i "$venv/bin/python" -o "$wheels"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    --force-reinstall --no-deps "$wheels"/*.whl
# The `lamina` binary the tests compare lamina.sim and lamina.experiment
# with (a debug build: `cargo test --workspace` has built it already).
cargo build -q -p lamina-cli
export LAMINA_BIN=$target/debug/lamina
cd crates/lamina-py
"$venv/bin/python" -m pytest -q tests "$@"
