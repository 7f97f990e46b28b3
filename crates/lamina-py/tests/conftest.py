import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture(scope="session")
def lamina_bin():
    """The `lamina` binary the Python results are compared with:
    $LAMINA_BIN (scripts/python-tests.sh builds it and sets it)."""
    path = os.environ.get("LAMINA_BIN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("set LAMINA_BIN to a built `lamina` binary (scripts/python-tests.sh does)")
    return path
