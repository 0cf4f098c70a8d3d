set -u
set -f  # tool lists are split on ',' and ':' below, never globbed
# An exported CDPATH makes cd print the directory: $(cd DIR && pwd) would be two lines.
unset CDPATH

# One line: control characters of what the user gave (a newline in a name) become '?'.
die() {
    printf 'qmpirun: error: %s\n' "$(printf '%s' "$1" | tr '\001-\037\177' '?')" >&2
    exit 2
}

# Names and paths reach the ranks in variables and error lines: no control characters.
no_controls() {
    case $2 in
        *[[:cntrl:]]*) die "$1 holds a control character (a newline, a tab?): refused" ;;
    esac
}

# Where the core is: this script in PREFIX/bin, the library in PREFIX/lib; or both in
# the core's build directory. Found from the script itself, so the tree is relocatable.
script=$0
case $script in
    */*) ;;
    *) [ -f "$script" ] || script=$(command -v "$script") || die "cannot find where $0 lies" ;;
esac
resolved=$(readlink -f "$script" 2>/dev/null) && [ -n "$resolved" ] && script=$resolved
here=$(cd -P -- "$(dirname -- "$script")" && pwd) || die "cannot find where $0 lies"
if [ -f "$here/../lib/$qmpi_soname" ]; then
    prefix=$(cd -P -- "$here/.." && pwd)
    core=$prefix/lib/$qmpi_soname
    tooldir=$prefix/lib/qmpi/tools
elif [ -f "$here/$qmpi_soname" ]; then
    core=$here/$qmpi_soname
    tooldir=
else
    die "no QMPI core ($qmpi_soname) in $here/../lib or $here: install it with 'make install' or build it with 'make'"
fi

usage() {
    default_tools=${tooldir:-PREFIX/lib/qmpi/tools}
    cat <<EOF
usage: qmpirun [-t TOOL,...] [-c CONF] [-v] -- LAUNCHER [ARG...]

Runs LAUNCHER (mpiexec, mpirun, srun, or the program itself) with the QMPI core
preloaded into every rank and the tools in chain order, the first one closest to the
application.

  -t TOOL,...  the chain, comma-separated; -t again appends. Each TOOL is
                 NAME    libNAME.so from a directory of QMPI_TOOL_PATH (a colon
                         list), else from $default_tools
                 PATH    a tool library (anything with a '/')
                 @NAME   the callback tool registered as NAME (MPI Forum / MPICH
                         interface); its libNAME.so is preloaded too when found as above
                 %NAME   the thesis-style tool linked into the program as NAME
                         (-DQMPI_STATIC_TOOL=NAME)
  -c CONF      set QMPI_CONF=CONF for the ranks: the configuration file is the chain,
               with each instance's arguments (not with -t)
  -v           set QMPI_VERBOSE=1 for the ranks; print the command run on stderr
  -h, --help   this text
  --version    the version of this core and the MPI it was generated for

The ranks get LD_PRELOAD (the core, then any LD_PRELOAD of yours) and QMPI_TOOLS, plus
QMPI_VERBOSE and QMPI_CONF when asked: with -x after Open MPI's mpiexec or mpirun,
with -genv after MPICH's or Intel MPI's (hydra), exported for any other launcher.

Examples:
  qmpirun -t counter,tbcast,counter -- mpiexec -n 4 ./app
  QMPI_TOOL_PATH=\$HOME/qmpi-tools qmpirun -v -t profiler -- mpirun -n 8 ./app
  qmpirun -t ./libmytool.so,@cbcount -- srun -n 64 ./app
EOF
}

# Sets `found` to the absolute path of tool $1 (libNAME.so, or NAME itself if it names
# a .so file) from QMPI_TOOL_PATH's directories, then from the core's tool directory.
find_tool() {
    case $1 in
        *.so | *.so.*) file=$1 ;;
        *) file=lib$1.so ;;
    esac
    saved_ifs=$IFS
    IFS=:
    for dir in ${QMPI_TOOL_PATH:-}${tooldir:+:$tooldir}; do
        if [ -n "$dir" ] && [ -f "$dir/$file" ]; then
            IFS=$saved_ifs
            found=$(cd -P -- "$dir" && pwd)/$file
            return 0
        fi
    done
    IFS=$saved_ifs
    return 1
}

# LD_PRELOAD separates entries with ':' and with blanks.
add_preload() {
    case $1 in
        *[[:space:]:]*) die "cannot preload '$1': LD_PRELOAD cannot hold a path with blanks or ':'" ;;
    esac
    case :$preload: in
        *:"$1":*) ;;
        *) preload=$preload:$1 ;;
    esac
}

# Shell-quotes $1 for printing the command.
quote() {
    case $1 in
        '' | *[!A-Za-z0-9_./:=@%+,-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
        *) printf '%s' "$1" ;;
    esac
}

tool_list=
have_tools=
conf=
verbose=
launcher_given=
while [ $# -gt 0 ]; do
    case $1 in
        --) shift; launcher_given=1; break ;;
        -t) [ $# -ge 2 ] || die "-t needs a list of tools (qmpirun -t counter,tbcast -- mpiexec -n 4 ./app)"
            tool_list=${have_tools:+$tool_list,}$2; have_tools=1; shift 2 ;;
        -t?*) tool_list=${have_tools:+$tool_list,}${1#-t}; have_tools=1; shift ;;
        -c) [ $# -ge 2 ] || die "-c needs a configuration file"
            conf=$2; shift 2 ;;
        -c?*) conf=${1#-c}; shift ;;
        -v) verbose=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --version) printf '%s\n' "$qmpi_version"; exit 0 ;;
        -*) die "unknown option '$1' (see qmpirun -h)" ;;
        *) die "missing '--' before the launcher command: qmpirun [-t TOOL,...] -- $1 ..." ;;
    esac
done
[ -n "$launcher_given" ] || die "missing '--' and a launcher command: qmpirun [-t TOOL,...] -- mpiexec -n 4 ./app"
[ $# -gt 0 ] || die "no launcher command after '--' (qmpirun [-t TOOL,...] -- mpiexec -n 4 ./app)"

preload=
add_preload "$core"
chain=
if [ -n "$have_tools" ]; then
    no_controls "-t '$tool_list'" "$tool_list"
    case ,$tool_list, in
        *,,*) die "-t: empty tool name in '$tool_list'" ;;
    esac
    where="QMPI_TOOL_PATH (${QMPI_TOOL_PATH:-unset})${tooldir:+ or $tooldir}"
    saved_ifs=$IFS
    IFS=,
    for entry in $tool_list; do
        IFS=$saved_ifs
        case $entry in
            *:*) die "tool '$entry': ':' separates the core's TOOLS entries, so no tool name or path may hold one" ;;
            @) die "tool '@': a callback tool needs its registered name (@NAME)" ;;
            %) die "tool '%': a statically linked tool needs its name (%NAME)" ;;
            %*) ;;
            @*) if find_tool "${entry#@}"; then add_preload "$found"; fi ;;
            */*) [ -f "$entry" ] || die "tool '$entry': no such file"
                 entry=$(cd -P -- "$(dirname -- "$entry")" && pwd)/$(basename -- "$entry") ;;
            *) find_tool "$entry" || die "tool '$entry' not found: no $file in $where"
               entry=$found ;;
        esac
        chain=${chain:+$chain:}$entry
    done
    IFS=$saved_ifs
fi
preload=${preload#:}${LD_PRELOAD:+:$LD_PRELOAD}
if [ -n "$conf" ]; then
    [ -z "$have_tools" ] || die "-c and -t exclude each other: the configuration file '$conf' lists the chain"
    no_controls "-c '$conf'" "$conf"
    [ -f "$conf" ] || die "-c: configuration file '$conf' not found"
    conf=$(cd -P -- "$(dirname -- "$conf")" && pwd)/$(basename -- "$conf")
fi

launcher=$1
shift
command -v "$launcher" >/dev/null 2>&1 || die "launcher '$launcher' not found"
# Launchers that start ranks on other nodes forward only what they are told to.
kind=environment
case ${launcher##*/} in
    mpiexec* | mpirun* | orterun | prterun)
        case $("$launcher" --version 2>&1 </dev/null) in
            *"Open MPI"* | *OpenRTE*) kind=openmpi ;;
            *HYDRA* | *"Intel(R) MPI"*) kind=hydra ;;
        esac ;;
esac
case $kind in
    openmpi)
        [ -z "$conf" ] || set -- -x "QMPI_CONF=$conf" "$@"
        [ -z "$verbose" ] || set -- -x QMPI_VERBOSE=1 "$@"
        set -- -x "LD_PRELOAD=$preload" -x "QMPI_TOOLS=$chain" "$@" ;;
    hydra)
        [ -z "$conf" ] || set -- -genv QMPI_CONF "$conf" "$@"
        [ -z "$verbose" ] || set -- -genv QMPI_VERBOSE 1 "$@"
        set -- -genv LD_PRELOAD "$preload" -genv QMPI_TOOLS "$chain" "$@" ;;
    *)
        [ -z "$conf" ] || export QMPI_CONF="$conf"
        [ -z "$verbose" ] || export QMPI_VERBOSE=1
        export LD_PRELOAD="$preload" QMPI_TOOLS="$chain" ;;
esac

if [ -n "$verbose" ]; then
    line=qmpirun:
    [ "$kind" != environment ] || line="$line LD_PRELOAD=$(quote "$preload") QMPI_TOOLS=$(quote "$chain")"
    for word in "$launcher" "$@"; do
        line="$line $(quote "$word")"
    done
    printf '%s\n' "$line" >&2
fi
exec "$launcher" "$@"
