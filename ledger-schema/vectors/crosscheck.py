#!/usr/bin/env python3
"""Independent check of positive.json with another CBOR and BLAKE3 implementation.

For each vector: cbor2 decodes the bytes, cbor2's own canonical encoder re-encodes them and
must give the identical bytes; blake3's derive_key mode with the entry context must give the
frozen hash; and each entry's `prev` must be the previous vector's hash.
Run: pip install cbor2 blake3 && python3 ledger-schema/vectors/crosscheck.py"""
import json, os, sys
import blake3, cbor2

here = os.path.dirname(os.path.abspath(__file__))
vectors = json.load(open(os.path.join(here, "positive.json")))
prev = bytes(32)
for v in vectors:
    raw = bytes.fromhex(v["hex"])
    value = cbor2.loads(raw)
    again = cbor2.dumps(value, canonical=True)
    assert again == raw, f"{v['name']}: cbor2 canonical re-encoding differs"
    digest = blake3.blake3(raw, derive_key_context="closure-ledger v1 entry").hexdigest()
    assert "b3:" + digest == v["hash"], f"{v['name']}: hash differs"
    assert value["prev"] == prev, f"{v['name']}: prev link differs"
    assert value["v"] == 1 and value["seq"] == v["seq"]
    prev = bytes.fromhex(digest)
print(f"crosscheck: {len(vectors)} positive vectors verified by cbor2 {cbor2.__name__} + blake3")
