"""`qmpigen trace DIR -o OUT` never deletes what the merge did not make (issue 32, item 1):
`-o .`, `-o ..`, a source directory, the input directory, a symbolic link, an earlier
merge's output with a file of the user's in it: one line naming OUT, exit 1, every file
as it was; an earlier merge's output is replaced, in one step (qmpigen.trace.outdir).
Before: `shutil.rmtree(OUT)` whatever OUT was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("otf2")
pytest.importorskip("matplotlib")

import trace_writer as w  # noqa: E402

from qmpigen.trace import merge, outdir  # noqa: E402
from qmpigen.trace.gather import MergeError  # noqa: E402

# Seconds of merges of crafted traces: in `make test-trace`, not in `make test-fast`.
pytestmark = [pytest.mark.trace, pytest.mark.slow]


def _tree(root: Path) -> dict:
    """Every path under root (links not followed) with its bytes or link target."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project: sources, a traced run's rank files; the current directory is inside it."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.c").write_text("int main(void) { return 0; }\n")
    (root / "Makefile").write_text("all:\n")
    w.write_run(root / "run", 2)
    monkeypatch.chdir(root)
    return root


def _refused(directory: str, out: str, root: Path, *words: str) -> None:
    before = _tree(root.parent)
    lines: list = []
    assert merge.run(Path(directory), Path(out), None, lines.append) == 1
    assert len(lines) == 1 and lines[0].startswith(f"qmpigen: error: {Path(out)}: "), lines
    assert all(word in lines[0] for word in words), lines
    assert _tree(root.parent) == before  # nothing deleted, nothing made (no staging directory left)


@pytest.mark.parametrize(
    "cwd, directory, out, words",
    [
        (".", "run", ".", ("current directory",)),
        ("src", "../run", "..", ("current directory",)),
        (".", "run", "src", ("not the output of an earlier qmpigen trace", "app.c")),
        (".", "run", "run", ("input directory",)),
        ("src", "../run", "../../project", ("current directory",)),
        (".", "run/", "./run/.", ("input directory",)),
    ],
)
def test_refused_outputs_are_left_as_they_were(project, monkeypatch, cwd, directory, out, words):
    monkeypatch.chdir(project / cwd)
    _refused(directory, out, project, *words)


def test_a_directory_holding_the_input_is_refused(project, monkeypatch):
    monkeypatch.chdir(project.parent)
    _refused("project/run", "project", project, "input directory or one that holds it")


def test_an_earlier_output_is_replaced_and_nothing_else(project):
    lines: list = []
    assert merge.run(Path("run"), Path("merged"), None, lines.append) == 0, lines
    first = (project / "merged" / "summary.txt").read_text()
    assert outdir.not_an_output(project / "merged") is None
    w.write_run(project / "run", 3, n_calls=10, run_id=0x999, realtime=2_000_000_000_000_000_000)
    assert merge.run(Path("run"), Path("merged"), None, lines.append) == 0, lines
    second = (project / "merged" / "summary.txt").read_text()
    assert second != first and "rank 2" in second
    assert sorted(p.name for p in project.iterdir()) == ["Makefile", "merged", "run", "src"]  # no staging left
    # the same output with a file of the user's in it is no longer a merge's: refused
    (project / "merged" / "notes.txt").write_text("mine\n")
    _refused("run", "merged", project, "it holds notes.txt")
    (project / "merged" / "notes.txt").unlink()
    (project / "merged" / outdir.MARKER).write_text("something else\n")
    _refused("run", "merged", project, "is not the one a merge writes")


def test_a_symbolic_link_is_refused(project):
    assert merge.run(Path("run"), Path("merged"), None, print) == 0
    (project / "latest").symlink_to("merged")
    _refused("run", "latest", project, "symbolic link")
    (project / "to-src").symlink_to("src")
    _refused("run", "to-src", project, "symbolic link")


def test_an_output_that_changes_during_the_merge_is_put_back(project, monkeypatch):
    """OUT checked, then replaced by a user's directory before the swap: the exchange is
    undone and the user's directory stays (the check after the exchange)."""
    assert merge.run(Path("run"), Path("merged"), None, print) == 0
    staging = project / ".merged.test"
    staging.mkdir()
    outdir.write_marker(staging)
    (project / "merged" / "mine.txt").write_text("mine\n")  # no longer a merge's output
    monkeypatch.setattr(outdir, "check_output", lambda directory, out: None)  # as if checked before the change
    with pytest.raises(MergeError, match="changed during the merge"):
        outdir.swap_in(staging, project / "run", project / "merged")
    assert (project / "merged" / "mine.txt").read_text() == "mine\n"
    assert outdir.not_an_output(staging) is None  # the new one back where it was built
