"""Stage 1: read mpi.h through the MPI's own compiler driver.

`mpicc -E` gives the exact declarations the MPI's users compile against (its include
paths, its configuration macros); `mpicc -E -dM` gives the macro table, which tells
which MPI names are macros and what the version macros say.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional, Sequence, Tuple

from qmpigen.errors import QmpigenError
from qmpigen.mpi.quirks import NEUTRALISING_DEFINES

PREPROCESS_TIMEOUT_S = 120
PROBE = "qmpigen_probe.c"  # the one-line file preprocessed: #include <mpi.h>


@dataclass(frozen=True)
class HeaderRequest:
    """Which mpi.h to read and with which driver."""

    mpi_header: str = "auto"  # "auto" or a path to a header file
    mpicc: Optional[str] = None  # compiler driver; default: mpicc on PATH
    cflags: Tuple[str, ...] = ()  # extra flags for the driver (-I, -D)


@dataclass(frozen=True)
class PreprocessedHeader:
    text: str  # preprocessed C source (with linemarkers)
    header_path: str  # the mpi.h that was read (absolute; never written into outputs)
    driver: Tuple[str, ...]  # the command used, e.g. ("mpicc",)
    object_macros: Dict[str, str] = field(default_factory=dict)  # NAME -> replacement text
    function_macros: FrozenSet[str] = frozenset()  # names of function-like macros

    @property
    def driver_found(self) -> Tuple[str, ...]:
        """The driver with its program as PATH finds it (absolute), for messages."""
        found = shutil.which(self.driver[0]) or self.driver[0]
        return (os.path.abspath(found),) + self.driver[1:]

    @property
    def macro_names(self) -> FrozenSet[str]:
        return frozenset(self.object_macros) | self.function_macros


def resolve_driver(request: HeaderRequest) -> Tuple[str, ...]:
    if request.mpicc:
        parts = tuple(request.mpicc.split())
        if not shutil.which(parts[0]):
            raise QmpigenError(f"compiler driver '{parts[0]}' not found (from --mpicc)")
        return parts
    if shutil.which("mpicc"):
        return ("mpicc",)
    if request.mpi_header != "auto":
        # An explicit header only needs a C preprocessor.
        for cc in (os.environ.get("CC", ""), "cc", "gcc"):
            if cc and shutil.which(cc):
                return (cc,)
    raise QmpigenError(
        "no MPI compiler driver 'mpicc' on PATH: put the MPI's bin directory on PATH, "
        "or pass --mpicc DRIVER, or --mpi-header PATH"
    )


# What a header given by path is when it is not a regular file, by stat's file type.
NOT_A_FILE = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def _check_header_file(given: str, path: str) -> None:
    """A header given by path is a regular file (a FIFO or /dev/zero would hang or fill
    the preprocessor): say what it is otherwise."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise QmpigenError(f"MPI header not found: {given}") from None
    except OSError as exc:
        raise QmpigenError(f"MPI header {given}: {exc.strerror}") from None
    for test, what in NOT_A_FILE:
        if test(mode):
            raise QmpigenError(f"MPI header {given} is {what}, not a file")
    if not stat.S_ISREG(mode):
        raise QmpigenError(f"MPI header {given} is not a regular file")


def read_header(request: HeaderRequest) -> PreprocessedHeader:
    """Preprocess `#include <mpi.h>` (or the given header) and collect its macros."""
    if request.mpi_header != "auto":
        path = os.path.abspath(request.mpi_header)
        _check_header_file(request.mpi_header, path)
        include = f'#include "{path}"\n'
        # Its siblings come from its own directory (MPICH's mpi.h has #include <mpi_proto.h>),
        # not from some other MPI's include directory or nowhere (plain cc).
        header_dir: Tuple[str, ...] = (f"-I{os.path.dirname(path)}",)
    else:
        header_dir = ()
        path = ""
        include = "#include <mpi.h>\n"
    driver = resolve_driver(request)

    with tempfile.TemporaryDirectory(prefix="qmpigen-") as tmp:
        probe = os.path.join(tmp, PROBE)
        with open(probe, "w") as handle:
            handle.write(include)
        base = list(driver) + list(header_dir) + list(request.cflags)
        text = _run(base + ["-E"] + list(NEUTRALISING_DEFINES) + [probe], driver, request)
        macros = _run(base + ["-E", "-dM", probe], driver, request)
    # The probe's linemarkers by its name, not its temporary directory: the same MPI gives
    # the same text (the model cache's key, qmpigen.mpi.model_cache).
    text = text.replace(f'"{probe}"', f'"{PROBE}"')

    if not path:
        path = _included_header(text, "mpi.h")
        if not path:
            raise QmpigenError(f"'{' '.join(driver)} -E' did not include an mpi.h")
    object_macros, function_macros = _macro_table(macros)
    return PreprocessedHeader(text, path, driver, object_macros, function_macros)


def _run(cmd: Sequence[str], driver: Tuple[str, ...], request: HeaderRequest) -> str:
    what = "mpi.h" if request.mpi_header == "auto" else request.mpi_header
    try:
        proc = subprocess.run(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=PREPROCESS_TIMEOUT_S,
        )
    except OSError as exc:
        raise QmpigenError(f"cannot run '{driver[0]}': {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise QmpigenError(
            f"preprocessing {what} with '{' '.join(driver)} -E' took longer than {PREPROCESS_TIMEOUT_S} s"
        ) from None
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", errors="replace")
        detail = " | ".join(line.strip() for line in stderr.splitlines() if line.strip())[:600]
        raise QmpigenError(
            f"preprocessing {what} with '{' '.join(driver)} -E' failed (exit {proc.returncode}): {detail}"
        )
    # Bytes, decoded here: a binary file given as the header is bad input, not a crash.
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QmpigenError(f"{what} is not a C header: its preprocessed text is not UTF-8 (byte {exc.start})") from None


def linemarker(line: str) -> Optional[Tuple[int, str]]:
    """Parse a preprocessor linemarker '# 12 "file" 1 3' into (12, 'file')."""
    if not line.startswith("#"):
        return None
    parts = line[1:].split(None, 1)
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].startswith('"'):
        return None
    end = parts[1].find('"', 1)
    if end < 0:
        return None
    return int(parts[0]), parts[1][1:end]


def _included_header(text: str, basename: str) -> str:
    for line in text.splitlines():
        marker = linemarker(line)
        if marker and os.path.basename(marker[1]) == basename:
            return os.path.abspath(marker[1])
    return ""


def _macro_table(dump: str) -> Tuple[Dict[str, str], FrozenSet[str]]:
    """Split `-dM` output ('#define NAME value' / '#define NAME(args) value')."""
    object_macros: Dict[str, str] = {}
    function_macros = set()
    for line in dump.splitlines():
        if not line.startswith("#define "):
            continue
        rest = line[len("#define ") :]
        name_end = len(rest)
        for i, ch in enumerate(rest):
            if ch in "( \t":
                name_end = i
                break
        name = rest[:name_end]
        if rest[name_end : name_end + 1] == "(":
            function_macros.add(name)
        else:
            object_macros[name] = rest[name_end:].strip()
    return object_macros, frozenset(function_macros)
