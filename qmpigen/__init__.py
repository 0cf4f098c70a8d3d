"""qmpigen: generate the QMPI multi-tool MPI interception layer for any mpi.h."""

__version__ = "0.1.0"
