# Helpers shared by the benchmark scripts (sourced, not run).

# The time in nanoseconds (microsecond resolution) into the variable named $1: bash's own
# clock, so that no process is started between a timestamp and the command it times (a
# `date` in $(...) costs a fork and an exec, a millisecond charged to every command timed).
now() { local t=${EPOCHREALTIME//[!0-9]/}; printf -v "$1" '%s' "${t}000"; }
# Median of the numbers on stdin, one per line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Peak resident set of a command, in KiB (the kernel's own maxrss of the child); the
# command's output is discarded.
peak_kib() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
