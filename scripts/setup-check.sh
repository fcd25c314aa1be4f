#!/usr/bin/env bash
# Runs the README's "Set up on a fresh machine" block as a new user would: each command
# verbatim, from the repository's root, top to bottom; fails on the first that fails, with
# its output. scripts/test.sh runs it, so a README edit that breaks a set-up command fails CI.
#
# The block's own test command (./scripts/test.sh) is what is running when test.sh calls
# this script: that line is checked to name the running script (the same file, executable)
# instead of being run again, which would recurse.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/readme-lib.sh
lines=$(readme_block README.md "Set up on a fresh machine")
[ -n "$lines" ] || { echo "setup-check.sh: no \"Set up on a fresh machine\" block in README.md" >&2; exit 1; }
running=${POWERLENS_RUNNING_TEST_SH:-}
# Results the set-up commands save go to a scratch data directory, not the user's.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
n=0
while IFS= read -r line; do
    n=$((n + 1))
    read -r program _ <<<"$line"
    if [ -n "$running" ] && [ "$(realpath -q "$program" || true)" = "$running" ]; then
        [ -x "$program" ] || { echo "setup-check.sh: line $n names $program, which is not executable" >&2; exit 1; }
        echo "setup $n: $line  (the running test command itself: not run again)" >&2
        continue
    fi
    echo "setup $n: $line" >&2
    start=$SECONDS
    if ! XDG_DATA_HOME=$data bash -c "set -o pipefail; $line" >"$data/out.$n" 2>&1 </dev/null; then
        echo "setup-check.sh: line $n of the README's set-up block failed: $line" >&2
        tail -n 40 "$data/out.$n" >&2
        exit 1
    fi
    echo "setup $n: ok in $((SECONDS - start)) s" >&2
done <<<"$lines"
echo "setup-check.sh: all $n lines of the README's set-up block work as written" >&2
