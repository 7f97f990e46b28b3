"""examples/notebook.py runs whole (in its quick mode) and draws its figure."""

import os
import pathlib
import subprocess
import sys

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "examples" / "notebook.py"


def test_notebook_runs_and_draws(tmp_path):
    out = tmp_path / "figure.png"
    env = dict(os.environ, LAMINA_NOTEBOOK_QUICK="1", LAMINA_NOTEBOOK_OUT=str(out), MPLBACKEND="Agg")
    done = subprocess.run(
        [sys.executable, str(NOTEBOOK)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "binomial:k=4" in done.stdout
    assert out.stat().st_size > 10_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_readme_example(tmp_path):
    """README.md's Python section, run as written in a scratch directory."""
    readme = (pathlib.Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("## Python\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2
