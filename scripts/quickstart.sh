#!/usr/bin/env bash
# Runs the README's Quick start block top to bottom, line by line, as a new user would:
# in a temporary directory, with the results database there too (XDG_DATA_HOME), so that
# nothing is left outside it. Fails on the first line that fails. CI runs it (scripts/test.sh).
#
#   scripts/quickstart.sh [POWERLENS_BINARY]   # default: target/release/powerlens, built here
set -euo pipefail
cd "$(dirname "$0")/.."
readme=$PWD/README.md
if [ $# -ge 1 ]; then
    bin=$(realpath "$1")
else
    cargo build --release --locked -q
    bin=$PWD/target/release/powerlens
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin" "$work/data"
ln -s "$bin" "$work/bin/powerlens"
. scripts/readme-lib.sh
lines=$(readme_block "$readme" "Quick start")
[ -n "$lines" ] || { echo "quickstart.sh: no Quick start block in $readme" >&2; exit 1; }
repo=$PWD
touch "$work/started"
cd "$work"
export PATH="$work/bin:$PATH" XDG_DATA_HOME="$work/data"
n=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$((n + 1))
    echo "quickstart $n: $line" >&2
    if ! bash -c "set -o pipefail; $line" >"$work/out.$n" 2>&1 </dev/null; then
        echo "quickstart.sh: line $n failed: $line" >&2
        cat "$work/out.$n" >&2
        exit 1
    fi
done <<<"$lines"
# Nothing written outside the temporary directory: the home directory, the repository,
# the system's state and configuration.
leftovers=$(find "$HOME" "$repo" /var/lib /etc -xdev -newer "$work/started" -type f \
    -not -path "$work/*" -not -path "$repo/target/*" -not -path "$repo/.git/*" 2>/dev/null || true)
if [ -n "$leftovers" ]; then
    echo "quickstart.sh: the Quick start wrote outside its temporary directory:" >&2
    echo "$leftovers" >&2
    exit 1
fi
echo "quickstart.sh: all $n lines of the Quick start ran and wrote only in $work (now removed)" >&2
