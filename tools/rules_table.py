#!/usr/bin/env python3
"""Regenerates docs/rules.md: every `Rule` of src/runtime/mod.rs with its doc line and the
tests (replay-tests/tests/*.rs) that name it. Run from the repository root."""
import glob, os, re

src = open('src/runtime/mod.rs').read()
body = src[src.index('pub enum Rule {'):]
body = body[:body.index('\n}\n')]
rules = re.findall(r'((?:\s*///[^\n]*\n)+)\s*(\w+),', body)
tests = {}
for f in sorted(glob.glob('replay-tests/tests/*.rs')):
    t = open(f).read()
    for m in re.finditer(r'#\[test\]\s*\nfn (\w+)\(\)(.*?)(?=\n#\[test\]|\Z)', t, re.S):
        name, fb = m.group(1), m.group(2)
        for r in sorted(set(re.findall(r'Rule::(\w+)', fb))):
            tests.setdefault(r, []).append(f"`{os.path.basename(f)[:-3]}::{name}`")
rows = []
for doc, name in rules:
    d = ' '.join(l.strip()[3:].strip() for l in doc.strip().split('\n'))
    rows.append(f"| `{name}` | {d} | {', '.join(tests.get(name, ['**none**']))} |")
head = open('docs/rules.md').read().split('| rule |')[0]
open('docs/rules.md', 'w').write(head + "| rule | what it requires | tests |\n|------|------------------|-------|\n" + "\n".join(rows) + "\n")
n_tests = len({t for ts in tests.values() for t in ts})
print(f"{len(rows)} rules, {sum(1 for r in rows if '**none**' in r)} without a test, {n_tests} tests naming a rule")
