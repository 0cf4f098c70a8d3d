"""Everything is in pyproject.toml but the one C extension, which needs setup.py for the
setuptools versions the project supports (pyproject's ext-modules needs setuptools 74.1).

qmpigen.trace._loops: the `qmpigen trace` merge's loops over calls (OTF2 events, JSON
text, the rank file walk), loaded with ctypes by qmpigen/trace/loops.py. Optional: where
it cannot be built, the install still succeeds and the merge runs its slower Python code.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("qmpigen.trace._loops", ["qmpigen/trace/_loops.c"], optional=True,
                             extra_compile_args=["-O2"])])
