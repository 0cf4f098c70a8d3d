"""Stage 1: read mpi.h through the MPI's own compiler driver.

`mpicc -E` gives the exact declarations the MPI's users compile against (its include
paths, its configuration macros); with `-dD` the same run keeps each #define, which
gives the macro table: which MPI names are macros and what the version macros say.
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
NONEXISTENT = 'ignoring nonexistent directory "'
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


def check_header_file(request: HeaderRequest) -> None:
    """A header given by path is a regular file (a FIFO or /dev/zero would hang or fill
    the preprocessor): say what it is otherwise. Checked before the driver, whatever
    reads the header first (the header cache asks the driver what it runs)."""
    if request.mpi_header != "auto":
        _check_header_file(request.mpi_header, os.path.abspath(request.mpi_header))


def _check_header_file(given: str, path: str) -> None:
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
    return read_header_and_search_path(request)[0]


def read_header_and_search_path(request: HeaderRequest) -> Tuple[PreprocessedHeader, Tuple[str, ...]]:
    """read_header, and the preprocessor's include search path, -iquote directories first
    (from `-Wp,-v`; empty where it does not print one): what qmpigen.mpi.header_cache
    checks for new files."""
    check_header_file(request)
    if request.mpi_header != "auto":
        path = os.path.abspath(request.mpi_header)
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
        # One run gives both: -dD keeps each #define where it happens (a second -dM run
        # cost as much again: about 0.05 s of a cached command's 0.56 s); -Wp,-v prints the
        # search path on stderr (plain -v is the driver's own: MPICH's prints its version).
        output, stderr = _run(base + ["-E", "-dD", "-Wp,-v"] + list(NEUTRALISING_DEFINES) + [probe], driver, request)
    text, object_macros, function_macros = _split_directives(output)
    # The probe's linemarkers by its name, not its temporary directory: the same MPI gives
    # the same text (the model cache's key, qmpigen.mpi.model_cache).
    text = text.replace(f'"{probe}"', f'"{PROBE}"')

    if not path:
        path = _included_header(text, "mpi.h")
        if not path:
            raise QmpigenError(f"'{' '.join(driver)} -E' did not include an mpi.h")
    return PreprocessedHeader(text, path, driver, object_macros, function_macros), _search_path(stderr)


QUOTE_SEARCH = '#include "..." search starts here:'
BRACKET_SEARCH = "#include <...> search starts here:"


def _search_path(stderr: str) -> Tuple[str, ...]:
    """The directories GCC's and Clang's `-v` list from '#include "..." search starts
    here:' (the -iquote directories; the line is there without any) or '#include <...>
    search starts here:' to 'End of search list.', and those they name as 'ignoring
    nonexistent directory' (one made later could shadow a header); () if the list is
    not there whole."""
    lines = stderr.splitlines()
    try:
        start = lines.index(QUOTE_SEARCH) if QUOTE_SEARCH in lines else lines.index(BRACKET_SEARCH)
        end = lines.index("End of search list.", start)
    except ValueError:
        return ()
    listed = [line.strip() for line in lines[start + 1 : end] if line.startswith(" ")]
    missing = [line[len(NONEXISTENT) : -1] for line in lines if line.startswith(NONEXISTENT) and line.endswith('"')]
    return tuple(listed + missing)


def _run(cmd: Sequence[str], driver: Tuple[str, ...], request: HeaderRequest) -> Tuple[str, str]:
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
    if proc.returncode != 0 and "-Wp,-v" in cmd:  # the message again, without -v's lines
        return _run([arg for arg in cmd if arg != "-Wp,-v"], driver, request)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", errors="replace")
        detail = " | ".join(line.strip() for line in stderr.splitlines() if line.strip())[:600]
        raise QmpigenError(
            f"preprocessing {what} with '{' '.join(driver)} -E' failed (exit {proc.returncode}): {detail}"
        )
    # Bytes, decoded here: a binary file given as the header is bad input, not a crash.
    try:
        return proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8", errors="replace")
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


# Names NEUTRALISING_DEFINES gives on the command line: not the MPI's macros.
NEUTRALISED = frozenset(flag[2:].split("=")[0].split("(")[0] for flag in NEUTRALISING_DEFINES)
COMMAND_LINE = "<command-line>"


def _split_directives(output: str) -> Tuple[str, Dict[str, str], FrozenSet[str]]:
    """Split `-E -dD` output into the C text and the macro table as it stands at the end
    (what `-dM` gives). Each directive line becomes an empty line, so the linemarkers'
    line numbers still hold for the text."""
    object_macros: Dict[str, str] = {}
    function_macros = set()
    lines = output.split("\n")
    on_command_line = False
    for index, line in enumerate(lines):
        if line.startswith("#define "):
            name, value, is_function = _macro_definition(line[len("#define ") :])
            lines[index] = ""
            if on_command_line and name in NEUTRALISED:
                continue
            object_macros.pop(name, None)
            function_macros.discard(name)
            if is_function:
                function_macros.add(name)
            else:
                object_macros[name] = value
        elif line.startswith("#undef "):
            name = line[len("#undef ") :].strip()
            object_macros.pop(name, None)
            function_macros.discard(name)
            lines[index] = ""
        elif line.startswith("# "):
            marker = linemarker(line)
            if marker:
                on_command_line = marker[1] == COMMAND_LINE
    return "\n".join(lines), object_macros, frozenset(function_macros)


def _macro_definition(rest: str) -> Tuple[str, str, bool]:
    """'NAME value' or 'NAME(args) value' -> (NAME, value, is function-like): a
    function-like macro's parenthesis follows its name directly."""
    head, _, value = rest.partition(" ")
    name, parenthesis, _ = head.partition("(")
    if parenthesis:
        return name, "", True
    return name, value.strip(), False
