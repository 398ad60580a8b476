#!/usr/bin/env python3
"""Reorders the fields of every `pub struct` (and struct-like enum variant bodies are left
alone) in the given Rust files into RFC 8949 canonical key order of their camelCase names:
shorter encoded key first, then bytewise. serde_cbor writes fields in declaration order, so
declaration order must be canonical order; tests/it/key_order.rs proves the result."""
import re, sys

def camel(n):
    p = n.split('_')
    return p[0] + ''.join(x[:1].upper() + x[1:] for x in p[1:])

def key(group):
    m = re.search(r'pub (\w+):', group[-1])
    c = camel(m.group(1)).encode()
    return (len(c), c)

for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if re.match(r'\s*pub struct \w+(<[^>]*>)? \{$', line):
            groups, cur = [], []
            while not re.match(r'\s*\}$', lines[i]):
                cur.append(lines[i])
                if re.search(r'pub \w+:', lines[i]) and lines[i].rstrip().endswith(','):
                    groups.append(cur); cur = []
                i += 1
            groups.sort(key=key)
            for g in groups: out.extend(g)
            out.extend(cur)
    open(path, 'w').write('\n'.join(out))
