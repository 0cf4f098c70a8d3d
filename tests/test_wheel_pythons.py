"""One wheel per platform for every Python 3: the merge's C loops are a plain shared
library (qmpigen/trace/libqmpigen_loops.so, loaded with ctypes), so the wheel is tagged
py3-none-<platform>, and the same file installs on other Pythons than the one that
built it and merges a trace there through its C loops, with the same output.

The Pythons: this one (a fresh venv that reaches this environment's packages), pyenv's
3.10 (a venv with qmpigen's requirements from PyPI: the whole merge) and the newest
pyenv Python (numpy only: the otf2 package has no wheels past 3.11, so the C loops read
a rank file there). QMPIGEN_WHEEL_PYTHONS=FULL:READ names two others. The venvs are made
once in .venv/wheel-pythons/ (pip's cache makes them quick again); the qmpigen wheel is
installed afresh on every run. Slow tier: `make test`."""

from __future__ import annotations

import glob
import os
import re
import site
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Optional, Sequence

import pytest
import tomllib

from conftest import REPO

pytestmark = pytest.mark.slow

# qmpigen's dependencies and its trace extra, as pyproject.toml names them.
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
REQUIREMENTS = tuple(PROJECT["dependencies"]) + tuple(PROJECT["optional-dependencies"]["trace"])
VENVS = REPO / ".venv" / "wheel-pythons"
# What manylinux2014 (glibc 2.17) allows the library to need: libc alone, no newer symbol.
GLIBC_MAX = (2, 17)
# A rank file read by the C loops (with numpy alone), printing what it holds.
READ = (
    "import sys; from pathlib import Path; from qmpigen.trace import read\n"
    "f = read.read_rank_file(Path(sys.argv[1])); print(len(f.calls), f.problem)\n"
)
# ... and that they are the wheel's own build, loaded: not a checkout's, not the Python walk.
OWN_LOOPS = (
    "import sys; from qmpigen.trace import loops\n"
    "assert loops.load() is not None and str(loops.library_path()).startswith(sys.prefix), loops.library_path()\n"
)


def pythons() -> Sequence[Optional[str]]:
    """(the one for the whole merge, the one that reads only), None where missing."""
    given = os.environ.get("QMPIGEN_WHEEL_PYTHONS")
    if given:
        full, _, reader = given.partition(":")
        return full or None, reader or None
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9].*/bin/python3")), key=_version)
    full = [p for p in found if _version(p)[:2] == (3, 10)]
    return (full[-1] if full else None), (found[-1] if found and _version(found[-1])[:2] > (3, 11) else None)


def _version(path: str):
    return tuple(int(x) for x in re.findall(r"\d+", path.split("/versions/")[1].split("/")[0]))


def test_the_wheel_is_one_per_platform_for_every_python(wheel):
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    assert re.fullmatch(r"qmpigen-[\d.]+-py3-none-linux_x86_64\.whl", wheel.name), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "qmpigen/trace/libqmpigen_loops.so" in names and not [n for n in names if "cpython" in n or ".abi3." in n]
    elf = ELFFile(BytesIO(zipfile.ZipFile(wheel).read("qmpigen/trace/libqmpigen_loops.so")))
    sections = list(elf.iter_sections())
    needed = [t.needed for s in sections if isinstance(s, DynamicSection) for t in s.iter_tags("DT_NEEDED")]
    versions = [
        a.name for s in sections if isinstance(s, GNUVerNeedSection) for _, auxes in s.iter_versions() for a in auxes
    ]
    assert needed == ["libc.so.6"], needed  # no libpython: any Python 3 loads it
    glibc = [tuple(int(x) for x in v[len("GLIBC_") :].split(".")) for v in versions if v.startswith("GLIBC_")]
    assert glibc and max(glibc) <= GLIBC_MAX, versions  # manylinux2014, as `make wheel`'s auditwheel says


def venv_for(python: str, requirements: Sequence[str]) -> Path:
    """A venv of `python` with `requirements` from PyPI, made once, then reused."""
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    venv = VENVS / version
    stamp = venv / ".requirements"
    if not stamp.exists() or stamp.read_text() != " ".join(requirements):
        subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
        proc = pip(venv, *requirements)
        assert proc.returncode == 0, f"installing {requirements} for Python {version}: {proc.stderr[-2000:]}"
        stamp.write_text(" ".join(requirements))
    return venv


def this_python_venv(work: Path) -> Path:
    """A fresh venv of this Python whose packages come from this environment (a .pth
    file: no index needed), so that qmpigen is the wheel's alone."""
    venv = work / "venv-here"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (fresh_site,) = (venv / "lib").glob("python*/site-packages")
    (fresh_site / "deps.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    return venv


def pip(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )


def install(venv: Path, wheel: Path) -> None:
    proc = pip(venv, "--force-reinstall", "--no-deps", str(wheel))
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_wheel_merges_a_trace_on_other_pythons_with_its_c_loops(wheel, tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    import trace_writer

    full, reader = pythons()
    if full is None or reader is None:
        pytest.skip("needs pyenv's 3.10 and a Python past 3.11 (or QMPIGEN_WHEEL_PYTHONS=FULL:READ)")
    run = tmp_path / "run"
    trace_writer.write_run(run, 4, n_calls=200)
    merged = []
    for venv in (this_python_venv(tmp_path), venv_for(full, REQUIREMENTS)):
        install(venv, wheel)
        check = subprocess.run(
            [str(venv / "bin" / "python"), "-c", OWN_LOOPS], capture_output=True, text=True, cwd=tmp_path
        )
        assert check.returncode == 0, check.stderr  # the wheel's own C loops, loaded
        out = tmp_path / f"merged-{venv.name}"
        proc = subprocess.run(
            [str(venv / "bin" / "qmpigen"), "trace", str(run), "-o", str(out)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        merged.append({name: (out / name).read_bytes() for name in ("summary.txt", "trace.json")})
    assert merged[0] == merged[1]  # this Python's merge and 3.10's: the same bytes
    venv = venv_for(reader, ("numpy>=1.22",))
    install(venv, wheel)
    rank_file = str(run / "synth_node_0_0.L1.qtr")
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", OWN_LOOPS + READ, rank_file], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    here = subprocess.run([sys.executable, "-c", READ, rank_file], capture_output=True, text=True, cwd=tmp_path)
    assert proc.stdout == here.stdout and proc.stdout.split()[0] != "0", proc.stdout + here.stdout
