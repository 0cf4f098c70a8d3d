"""templates/ and grammars/ ship inside the wheel and are found from an installed
(not editable) package: build the wheel, install it into a plain directory, and
generate from there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from conftest import FIXTURES, REPO


def test_wheel_carries_templates_and_grammars_and_works_installed(tmp_path):
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("qmpigen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for template in (REPO / "templates").rglob("*.j2"):
        assert f"qmpigen/templates/{template.relative_to(REPO / 'templates').as_posix()}" in names
    for grammar in (REPO / "grammars").glob("*.lark"):
        assert f"qmpigen/grammars/{grammar.name}" in names

    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run(
        [sys.executable, "-c", "import qmpigen.resources as r; print(r.templates_dir()); print(r.grammars_dir())"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.splitlines()), where.stdout
    out = tmp_path / "core"
    proc = subprocess.run(
        [sys.executable, "-m", "qmpigen", "build-core", "--mpi-header", str(FIXTURES / "quirks_mpi.h"),
         "--mpicc", "cc", "-o", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "qmpi.h").read_text().startswith("/* qmpi.h")
