"""mpi4py's own test suite (the test/ directory of its sdist), each rank writing every
test's outcome to <out>/outcomes.<rank> (tests/test_mpi4py_suite.py compares two runs).

    mpiexec -n 2 python mpi4py_suite.py OUT TESTDIR [main.py's arguments]

It runs TESTDIR/main.py (what runtests.py runs) with a test runner whose result also
records each test id and outcome: ok, skip, fail, error, xfail, xpass. A test with a
failing subtest is a fail (error: an error). The ranks' unittest output goes to stderr
as with runtests.py; their interleaving does not matter here.
"""

import os
import sys
import unittest

OUTCOMES = {}
RANK = {"error": 3, "fail": 2}  # a subtest's worse outcome wins


def record(test, outcome):
    key = test.id()
    if RANK.get(OUTCOMES.get(key, ""), 0) <= RANK.get(outcome, 1):
        OUTCOMES[key] = outcome


class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        record(test, "ok")

    def addError(self, test, err):
        super().addError(test, err)
        record(test, "error")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        record(test, "fail")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        record(test, "skip")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        record(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        record(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            record(test, "fail" if issubclass(err[0], test.failureException) else "error")


class Runner(unittest.TextTestRunner):
    resultclass = Result

    def run(self, test):
        result = super().run(test)
        from mpi4py import MPI

        path = os.path.join(OUT, f"outcomes.{MPI.COMM_WORLD.Get_rank()}")
        with open(path, "w") as out:
            out.writelines(f"{key} {outcome}\n" for key, outcome in sorted(OUTCOMES.items()))
        return result


if __name__ == "__main__":
    OUT, TESTDIR = sys.argv[1], sys.argv[2]
    sys.argv[1:] = sys.argv[3:]
    sys.dont_write_bytecode = True
    sys.path.insert(0, TESTDIR)
    from main import main

    main(module=None, testRunner=Runner)
