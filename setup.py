"""Everything is in pyproject.toml but the merge's C loops, which need setup.py for the
setuptools versions the project supports (pyproject's ext-modules needs setuptools 74.1).

qmpigen/trace/libqmpigen_loops.so, from qmpigen/trace/_loops.c: the `qmpigen trace`
merge's loops over calls (OTF2 events, JSON text, the rank file walk). It is a plain
shared library, not a Python extension: it uses no Python API and is loaded with ctypes
by qmpigen/trace/loops.py, so one build serves every Python 3. The wheel says so: one
per platform, tagged py3-none-<platform> (`make wheel` makes it manylinux with
auditwheel). Optional: where it cannot be built, the install still succeeds and the
merge runs its slower Python code.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1: the wheel package's
    from wheel.bdist_wheel import bdist_wheel

LOOPS = "qmpigen.trace.libqmpigen_loops"


class build_plain_library(build_ext):
    """The loops as a plain shared library: named without Python's extension suffix
    (cpython-311-...), linked with no Python library, exporting no PyInit_."""

    def get_ext_filename(self, fullname):
        if fullname.rsplit(".", 1)[-1] == LOOPS.rsplit(".", 1)[-1]:
            return os.path.join(*fullname.split(".")) + ".so"
        return super().get_ext_filename(fullname)

    def get_export_symbols(self, ext):
        return ext.export_symbols if ext.name == LOOPS else super().get_export_symbols(ext)

    def get_libraries(self, ext):
        return ext.libraries if ext.name == LOOPS else super().get_libraries(ext)


class bdist_wheel_any_python(bdist_wheel):
    """py3-none-<platform>: any Python 3 on this platform installs it."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    ext_modules=[Extension(LOOPS, ["qmpigen/trace/_loops.c"], optional=True, extra_compile_args=["-O2"])],
    cmdclass={"build_ext": build_plain_library, "bdist_wheel": bdist_wheel_any_python},
)
