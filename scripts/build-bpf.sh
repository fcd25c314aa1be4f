#!/usr/bin/env bash
# Rebuilds the in-kernel collector's BPF object from its source, as committed:
#   crates/powerlens-sys/src/trace/in_kernel/powerlens.bpf.c -> powerlens.bpf.o
# Needs clang (Debian: clang) with the BPF target. Building powerlens does not run this:
# the object is committed beside its source (with the clang major version that built it,
# powerlens.bpf.o.clang), and crates/powerlens-sys/tests/bpf_object.rs rebuilds it and
# compares where clang is installed. Run it after changing the source,
# and commit both.
#
# The object keeps its BTF (the loader's CO-RE relocations need it) but no DWARF, whose
# paths would make it depend on where the tree is; `-ffile-prefix-map` does the same for
# what BTF keeps of the source's path.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/crates/powerlens-sys/src/trace/in_kernel"
out=${1:-$dir/powerlens.bpf.o}
cd "$dir"
clang -g -O2 -target bpf -ffile-prefix-map="$dir"=. -c powerlens.bpf.c -o "$out.tmp"
strip=$(command -v llvm-strip || ls /usr/bin/llvm-strip-* 2>/dev/null | head -n1 || true)
if [ -n "$strip" ]; then
    "$strip" --strip-debug "$out.tmp"
fi
mv "$out.tmp" "$out"
# The clang major version that built the committed object: tests/bpf_object.rs compares
# bytes only with the same one (another clang lays the object out differently).
if [ "$out" = "$dir/powerlens.bpf.o" ]; then
    clang --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -n1 > "$dir/powerlens.bpf.o.clang"
fi
