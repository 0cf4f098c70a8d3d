"""templates/, grammars/, docs/, sample_tools/ and the LICENSE ship inside the wheel and
are found from an installed (not editable) package: build the wheel, install it into a
plain directory, and generate (and write the examples out) from there. Slow (building a
wheel takes seconds): `make test` runs it, `make test-fast` does not."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from conftest import FIXTURES, REPO, SAMPLE_TOOLS, shipped_samples

pytestmark = pytest.mark.slow


def test_wheel_carries_templates_and_grammars_and_works_installed(wheel, tmp_path):
    names = zipfile.ZipFile(wheel).namelist()
    for template in (REPO / "templates").rglob("*.j2"):
        assert f"qmpigen/templates/{template.relative_to(REPO / 'templates').as_posix()}" in names
    for grammar in (REPO / "grammars").glob("*.lark"):
        assert f"qmpigen/grammars/{grammar.name}" in names
    docs = REPO / "docs"
    manual = [*docs.rglob("*.md"), *docs.glob("*.png"), *docs.glob("design/pmpi-bench/*.[cp]*")]  # what pages link
    for doc in manual:
        assert f"qmpigen/docs/{doc.relative_to(docs).as_posix()}" in names
    samples = shipped_samples()
    assert {"printer.c", "tbcast.c", "counter.qmpi", "demo_app.c", "Makefile", "trace/lifecycle.c"} <= set(samples)
    for sample in samples:
        assert f"qmpigen/sample_tools/{sample}" in names
    (license_name,) = [n for n in names if n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n]
    assert zipfile.ZipFile(wheel).read(license_name) == (REPO / "LICENSE").read_bytes()
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License: BSD-3-Clause" in metadata and "Classifier: License :: OSI Approved :: BSD License" in metadata

    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import qmpigen.output.resources as r; print(r.templates_dir()); print(r.grammars_dir())",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.splitlines()), where.stdout
    out = tmp_path / "core"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "qmpigen",
            "build-core",
            "--mpi-header",
            str(FIXTURES / "quirks_mpi.h"),
            "--mpicc",
            "cc",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (out / "qmpi.h").read_text().startswith("/* qmpi.h")

    examples = tmp_path / "examples"
    proc = subprocess.run(
        [sys.executable, "-m", "qmpigen", "examples", str(examples)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (examples / "docs" / "spec-language.md").read_bytes() == (REPO / "docs" / "spec-language.md").read_bytes()
    for sample in samples:
        assert (examples / "sample_tools" / sample).read_bytes() == (SAMPLE_TOOLS / sample).read_bytes()
    written = sorted(p.relative_to(examples).as_posix() for p in examples.rglob("*") if p.is_file())
    assert written == sorted(
        [f"docs/{p.relative_to(docs).as_posix()}" for p in manual] + [f"sample_tools/{n}" for n in samples]
    )
