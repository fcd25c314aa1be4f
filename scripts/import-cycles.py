#!/usr/bin/env python3
"""Import circles between the source files of each crate.

Every file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` the
crate's root). An edge goes from a file to the module a `use crate::…` or `use super::…`
names (the longest module prefix of the path; grouped `use crate::{a, b::c}` counted
per item). Test code is left out: files named `tests.rs` or under `tests/`, and a file's
text from its first `#[cfg(test)]` on. A module and the modules it declares are one
idea only when they do not use each other both ways: every strongly connected group of
more than one file is a circle, printed with the edges that close it.

Usage: scripts/import-cycles.py [crates-dir]   exit status 1 when there is a circle.
       scripts/import-cycles.py --self-test     checks the checker on a made-up crate.
"""
import os
import re
import sys
from collections import defaultdict

USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+((?:crate|super)(?:::[^;]*)?);", re.M | re.S)


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def expand(tree):
    """`crate::a::{b, c::d}` → [crate::a::b, crate::a::c::d] (nested groups too)."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        return [tree]
    head, body = m.group(1), m.group(2)
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        items.append(cur)
    out = []
    for item in items:
        if item in ("self", ""):
            out.append(head)
        else:
            out.extend(expand(f"{head}::{item}"))
    return out


def resolve(path, here, modules, is_dir_module):
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        # `super` is the parent of the file's module (of `a::b` for a/b/c.rs).
        base = here
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
        rest = parts
    best = None
    for i in range(len(rest), -1, -1):
        cand = base + tuple(rest[:i])
        if cand in modules:
            best = cand
            break
    return best


def crate_graph(src):
    files = {}
    for dirpath, _, names in os.walk(src):
        if os.sep + "tests" in dirpath[len(src):]:
            continue
        for n in names:
            if n.endswith(".rs") and n != "tests.rs" and not n.endswith("_tests.rs"):
                p = os.path.join(dirpath, n)
                files[module_of(src, p)] = p
    modules = set(files)
    edges = defaultdict(set)
    for mod, path in files.items():
        text = open(path, encoding="utf-8").read()
        text = text.split("#[cfg(test)]")[0]
        for m in USE.finditer(text):
            for item in expand(m.group(1)):
                target = resolve(item, mod, modules, None)
                if target is not None and target != mod:
                    edges[mod].add(target)
    return files, edges


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            out.append(group)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "(root)"


def self_test():
    """A crate with a circle through `super` and a grouped `use`, a one-way edge, and test
    code that would close another circle: exactly one circle, of the right files."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "c", "src")
        os.makedirs(os.path.join(src, "m"))
        files = {
            "lib.rs": "mod a; mod m;\n",
            "a.rs": "use crate::m::{b::B, leaf};\n",
            "m/mod.rs": "pub mod b; pub mod leaf;\n",
            "m/b.rs": "use crate::a::A;\n#[cfg(test)]\nmod t { use super::super::leaf; }\n",
            "m/leaf.rs": "#[cfg(test)]\nuse crate::a::A;\n",
        }
        for name, text in files.items():
            open(os.path.join(src, name), "w").write(text)
        _, edges = crate_graph(src)
        groups = [sorted(g) for g in sccs(sorted(edges) + [("m", "leaf")], edges) if len(g) > 1]
        assert groups == [[("a",), ("m", "b")]], groups
        assert ("m", "leaf") in edges[("a",)], edges
        assert ("a",) not in edges.get(("m", "leaf"), set()), "test code counted"
    print("self-test ok")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    crates = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "crates")
    circles = 0
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        files, edges = crate_graph(src)
        for group in sccs(sorted(files), edges):
            if len(group) < 2:
                continue
            circles += 1
            members = set(group)
            print(f"{crate}: circle of {len(group)} files: {', '.join(sorted(name(m) for m in group))}")
            for a in sorted(group):
                for b in sorted(edges[a] & members):
                    print(f"    {name(a)} -> {name(b)}")
    if circles:
        print(f"{circles} import circle(s)")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
