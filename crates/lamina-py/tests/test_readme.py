"""The README's Python example, run as written in a fresh directory."""

import pathlib

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def python_blocks():
    blocks, current = [], None
    for line in README.read_text().splitlines():
        if current is None and line.strip() == "```python":
            current = []
        elif current is not None and line.startswith("```"):
            blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_every_python_example_of_the_readme_runs(tmp_path, monkeypatch):
    blocks = python_blocks()
    assert blocks, "the README has a Python example"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    # The example leaves its database behind, as a user's run would.
    assert (tmp_path / "demo-db" / "CURRENT").exists()
