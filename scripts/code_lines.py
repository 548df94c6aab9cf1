#!/usr/bin/env python3
"""Code lines of a Rust source tree: no blank lines, no comments (line, block or doc), nothing
under `#[cfg(test)]` (an item with that attribute, or a file a `#[cfg(test)] mod x;` mounts).

    python3 scripts/code_lines.py mesh-egress/src          # the total
    python3 scripts/code_lines.py mesh-egress/src --files  # per file, largest first
"""
import os
import re
import sys


def strip(text):
    """The text with comments blanked and string/char literals kept as they are."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            continue
        m = re.match(r'r(#*)"', text[i:i + 300]) if c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) else None
        if m:
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(text[i:j])
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|\\x..|[^\\'])'", text[i:i + 12])
            if m:
                out.append(m.group(0))
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


CFG_TEST = re.compile(r"#\[cfg\((test|all\(test[^\]]*|any\(test[^\]]*)\)\]")


def drop_cfg_test(code, test_mods):
    """Blank every item that carries `#[cfg(test)]`; record `mod x;` files it mounts."""
    lines = code.split("\n")
    keep = [True] * len(lines)
    i = 0
    while i < len(lines):
        if CFG_TEST.search(lines[i]):
            start = i
            j = i + 1
            while j < len(lines) and (lines[j].strip().startswith("#[") or not lines[j].strip()):
                j += 1
            if j < len(lines):
                m = re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", lines[j])
                if m:
                    test_mods.add(m.group(3))
                    for k in range(start, j + 1):
                        keep[k] = False
                    i = j + 1
                    continue
                # the item runs to the end of its braces (or to a `;` before any brace)
                depth, k, seen = 0, j, False
                while k < len(lines):
                    for ch in lines[k]:
                        if ch == "{":
                            depth += 1
                            seen = True
                        elif ch == "}":
                            depth -= 1
                    if (seen and depth <= 0) or (not seen and lines[k].rstrip().endswith(";")):
                        break
                    k += 1
                for x in range(start, min(k, len(lines) - 1) + 1):
                    keep[x] = False
                i = k + 1
                continue
        i += 1
    return [l for l, k in zip(lines, keep) if k]


def count(root):
    per_file = {}
    excluded = set()
    paths = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".rs"):
                paths.append(os.path.join(d, f))
    for p in sorted(paths):
        mods = set()
        lines = drop_cfg_test(strip(open(p, encoding="utf-8").read()), mods)
        base = os.path.dirname(p)
        stem = os.path.splitext(os.path.basename(p))[0]
        for m in mods:
            here = base if stem in ("mod", "lib", "main") else os.path.join(base, stem)
            for cand in (os.path.join(here, m + ".rs"), os.path.join(here, m, "mod.rs")):
                excluded.add(os.path.normpath(cand))
            excluded.add(os.path.normpath(os.path.join(here, m)))
        per_file[p] = sum(1 for l in lines if l.strip())
    total = {}
    for p, c in per_file.items():
        np = os.path.normpath(p)
        if np in excluded or any(np.startswith(e + os.sep) for e in excluded):
            continue
        total[p] = c
    return total


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else "mesh-egress/src"
    files = count(root)
    if "--files" in sys.argv:
        for p, c in sorted(files.items(), key=lambda x: -x[1]):
            print(f"{c:6} {p}")
    print(sum(files.values()))
