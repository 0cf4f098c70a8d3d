#!/bin/sh
# bench.sh [ROUNDS] - ns per MPI_Comm_rank for each configuration, configurations
# interleaved ROUNDS times and the minimum kept (the machine may be shared).
cd "$(dirname "$0")"
MPIBIN=${MPIBIN:-/work/main/.venv/mpich/bin}
PATH=$MPIBIN:$PATH
ROUNDS=${1:-5}
N=${N:-2000000}
rep() { s=""; i=0; while [ $i -lt $2 ]; do s="$s${s:+:}$1"; i=$((i+1)); done; echo "$s"; }
run() { # name tools binary [shared]
  if [ -n "$4" ]; then set -- "$1" "$2" "$3" QM_PMPI_SHARED=1; else set -- "$1" "$2" "$3" QM_PMPI_SHARED_UNSET=1; fi
  if [ -n "$2" ]; then env -u QM_PMPI_SHARED "$4" TOOLS="$2" mpiexec -n 1 "$3" bench "$N"; else env -u TOOLS mpiexec -n 1 "$3" bench "$N"; fi |
    awk -v name="$1" '/^bench:/ { print name, $2 }'
}
{
  r=0
  while [ $r -lt "$ROUNDS" ]; do
    run direct_no_core "" ./app_direct
    run core_0_tools "" ./app
    for n in 1 2 8; do
      run "qmpi_layer_x$n" "$(rep ./libqcounter.so $n)" ./app
      run "pmpi_layer_x$n" "$(rep ./libpmpitool.so $n)" ./app
      run "pmpi_shared_tls_x$n" "$(rep ./libpmpitool.so $n)" ./app shared
    done
    r=$((r+1))
  done
} | awk '{ if (!($1 in best) || $2 < best[$1]) best[$1] = $2 }
         END { for (k in best) printf "%-16s %7.2f ns\n", k, best[k];
               printf "per QMPI layer (x8-x1)/7: %.2f ns\nper PMPI layer (x8-x1)/7: %.2f ns\n",
                      (best["qmpi_layer_x8"] - best["qmpi_layer_x1"]) / 7, (best["pmpi_layer_x8"] - best["pmpi_layer_x1"]) / 7;
               printf "per PMPI layer, shared XMPI_+TLS (x2-x1): %.2f ns\n", best["pmpi_shared_tls_x2"] - best["pmpi_shared_tls_x1"] }' | sort
