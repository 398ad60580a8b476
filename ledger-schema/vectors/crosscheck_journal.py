#!/usr/bin/env python3
"""Independent check of journal.json against docs/format.md ("Journal, format v2" and
"Journal, format v3").

Written from the spec alone (blake3 only): the 60-byte record header, its header and
payload checks, the v3 padding and end marker, and both torn-tail rules (a vector with
`"journalFormat": 3` is checked against v3, any other against v2). Exit status 1 on any mismatch, with one line
per mismatch. Importable: `parse_record`, `seal`, `classify_tail` are reused by the
whole-ledger verifier.
"""
import json
import pathlib
import struct
import sys

from blake3 import blake3

MAGIC = b"CLJ2"
HEADER = 60
MAX_PAYLOAD = 16_777_216
MAX_COUNT = 4_096
CTX_HEADER = "closure-ledger v2 journal record header"
CTX_PAYLOAD = "closure-ledger v2 journal record payload"


def derive_key(context, data):
    return blake3(data, derive_key_context=context).digest()


def header_check(first20):
    return derive_key(CTX_HEADER, first20)[:8]


def seal(first_seq, count, payload):
    """The record for a frame: header (with both checks) then the payload."""
    head = MAGIC + struct.pack(">IQI", len(payload), first_seq, count)
    return head + header_check(head) + derive_key(CTX_PAYLOAD, head + payload) + payload


def parse_record(buf, off=0):
    """Check the record at buf[off:]. Returns (fault, end, first_seq, count, payload);
    fault is None for an intact record. Fault names follow the vectors' `fault` field."""
    avail = len(buf) - off
    if buf[off:off + min(4, avail)] != MAGIC[:min(4, avail)] or avail == 0:
        return "Magic", None, None, None, None
    if avail < HEADER:
        return "Incomplete", None, None, None, None
    head = buf[off:off + 20]
    if buf[off + 20:off + 28] != header_check(head):
        return "HeaderCheck", None, None, None, None
    plen, first_seq, count = struct.unpack(">IQI", head[4:20])
    if not (1 <= plen <= MAX_PAYLOAD and 1 <= count <= MAX_COUNT):
        return "Bounds", None, None, None, None
    end = off + HEADER + plen
    if len(buf) < end:
        return "Incomplete", None, None, None, None
    payload = buf[off + HEADER:end]
    if buf[off + 28:off + 60] != derive_key(CTX_PAYLOAD, head + payload):
        return "PayloadCheck", None, None, None, None
    return None, end, first_seq, count, payload


def parse_single(buf):
    """A sled value: exactly one intact record, nothing after it."""
    fault, end, *_ = parse_record(buf)
    if fault is None and end != len(buf):
        return "Trailing"
    return fault


def next_intact(tail):
    """First intact record starting at offset >= 1 of `tail`: (offset, firstSeq) or None."""
    i = tail.find(MAGIC, 1)
    while i != -1:
        fault, _, first_seq, *_ = parse_record(tail, i)
        if fault is None:
            return (i, first_seq)
        i = tail.find(MAGIC, i + 1)
    return None


def classify_tail(tail, next_seq, is_last):
    """The torn-tail rule. Returns ('clean'|'torn'|'damaged', next intact record or None)."""
    if not tail:
        return "clean", None
    found = next_intact(tail)
    if not is_last or found is not None or len(tail) >= HEADER + MAX_PAYLOAD:
        return "damaged", found
    n = len(tail)
    if tail.count(0) == n:                                            # 3(a)
        return "torn", None
    if n < HEADER:                                                    # 3(b)
        ok = tail[:min(n, 4)] == MAGIC[:min(n, 4)]
        if n >= 8:
            ok = ok and 1 <= struct.unpack(">I", tail[4:8])[0] <= MAX_PAYLOAD
        if n >= 20:
            ok = ok and 1 <= struct.unpack(">I", tail[16:20])[0] <= MAX_COUNT
        if n >= 16:
            ok = ok and struct.unpack(">Q", tail[8:16])[0] == next_seq
        if n >= 28:
            ok = ok and tail[20:28] == header_check(tail[:20])
        return ("torn" if ok else "damaged"), None
    head = tail[:20]                                                  # 3(c)
    plen, first_seq, count = struct.unpack(">IQI", head[4:20])
    ok = (head[:4] == MAGIC and tail[20:28] == header_check(head)
          and 1 <= plen <= MAX_PAYLOAD and 1 <= count <= MAX_COUNT
          and first_seq == next_seq and HEADER + plen > n)
    return ("torn" if ok else "damaged"), None


MAGIC3 = b"CLJ3"
END3 = b"CLJ3-END"
CTX_HEADER3 = "closure-ledger v3 journal record header"
CTX_PAYLOAD3 = "closure-ledger v3 journal record payload"


def header_check3(first20):
    return derive_key(CTX_HEADER3, first20)[:8]


def padding3(plen):
    return (-(HEADER + plen + 8)) % 8


def seal3(first_seq, count, payload):
    """A v3 record: header, payload, zero padding to a multiple of 8, end marker."""
    head = MAGIC3 + struct.pack(">IQI", len(payload), first_seq, count)
    return (head + header_check3(head) + derive_key(CTX_PAYLOAD3, head + payload) + payload
            + b"\0" * padding3(len(payload)) + END3)


def parse_record3(buf, off=0):
    """Like parse_record, for a v3 record (a v3 segment reads no other format)."""
    avail = len(buf) - off
    if avail < HEADER:
        return "Incomplete", None, None, None, None
    if buf[off:off + 4] != MAGIC3:
        return "Magic", None, None, None, None
    head = buf[off:off + 20]
    if buf[off + 20:off + 28] != header_check3(head):
        return "HeaderCheck", None, None, None, None
    plen, first_seq, count = struct.unpack(">IQI", head[4:20])
    if not (1 <= plen <= MAX_PAYLOAD and 1 <= count <= MAX_COUNT):
        return "Bounds", None, None, None, None
    end = off + HEADER + plen + padding3(plen) + 8
    if len(buf) < end:
        return "Incomplete", None, None, None, None
    payload = buf[off + HEADER:off + HEADER + plen]
    if buf[off + 28:off + 60] != derive_key(CTX_PAYLOAD3, head + payload):
        return "PayloadCheck", None, None, None, None
    if buf[off + HEADER + plen:end] != b"\0" * padding3(plen) + END3:
        return "End", None, None, None, None
    return None, end, first_seq, count, payload


def parse_single3(buf):
    fault, end, *_ = parse_record3(buf)
    if fault is None and end != len(buf):
        return "Trailing"
    return fault


def next_intact3(tail):
    """First intact record of either format starting at offset >= 1."""
    i = tail.find(b"CLJ", 1)
    while i != -1:
        for parse in (parse_record, parse_record3):
            fault, _, first_seq, *_ = parse(tail, i)
            if fault is None:
                return (i, first_seq)
        i = tail.find(b"CLJ", i + 1)
    return None


def classify_tail3(tail, next_seq, is_last):
    """The v3 torn-tail rule. Returns ('unwritten'|'torn'|'damaged', next intact or None)."""
    found = next_intact3(tail)
    if not is_last or found is not None:
        return "damaged", found
    w = len(tail.rstrip(b"\0"))                                        # what was written
    if w == 0:
        return "unwritten", None
    p = tail[:w]
    if w < HEADER:                                                    # 1: a header prefix
        ok = p[:min(w, 4)] == MAGIC3[:min(w, 4)]
        if w >= 8:
            ok = ok and 1 <= struct.unpack(">I", p[4:8])[0] <= MAX_PAYLOAD
        if w >= 20:
            ok = ok and 1 <= struct.unpack(">I", p[16:20])[0] <= MAX_COUNT
        if w >= 16:
            ok = ok and struct.unpack(">Q", p[8:16])[0] == next_seq
        if w >= 28:
            ok = ok and p[20:28] == header_check3(p[:20])
        if ok:
            return "torn", None
    if len(tail) >= HEADER:                                           # 2: a header, no end
        head = tail[:20]
        plen, first_seq, count = struct.unpack(">IQI", head[4:20])
        if (head[:4] == MAGIC3 and tail[20:28] == header_check3(head)
                and 1 <= plen <= MAX_PAYLOAD and 1 <= count <= MAX_COUNT and first_seq == next_seq):
            length = HEADER + plen + padding3(plen) + 8
            if length > len(tail) or w <= length - 8:
                return "torn", None
    return "damaged", None


def main():
    path = pathlib.Path(__file__).with_name("journal.json")
    vectors = json.loads(path.read_text())
    bad, total = [], 0

    for r in vectors["records"]:
        total += 1
        want = bytes.fromhex(r.get("recordHex") or r["record_hex"])
        payload = bytes.fromhex(r.get("payloadHex") or r["payload_hex"])
        v3 = r.get("journalFormat") == 3
        got = (seal3 if v3 else seal)(r["firstSeq"], r["count"], payload)
        single = (parse_single3 if v3 else parse_single)(want)
        if got != want:
            bad.append(f"records/{r['name']}: resealed {got[:60].hex()} != {want[:60].hex()}")
        elif single is not None:
            bad.append(f"records/{r['name']}: own record refused ({single})")

    for r in vectors["bad_records"]:
        total += 1
        parse = parse_single3 if r.get("journalFormat") == 3 else parse_single
        fault = parse(bytes.fromhex(r.get("recordHex") or r["record_hex"]))
        if fault is None:
            bad.append(f"bad_records/{r['name']}: accepted (want {r['fault']})")
        elif fault != r["fault"]:
            # only refusal is required; a different fault name is reported, not fatal
            print(f"note: bad_records/{r['name']}: fault {fault}, vector says {r['fault']}")

    for t in vectors["tails"]:
        total += 1
        rule = classify_tail3 if t.get("journalFormat") == 3 else classify_tail
        verdict, found = rule(bytes.fromhex(t["tailHex"]), t["nextSeq"], t["isLast"])
        want_found = tuple(t["nextIntact"]) if t["nextIntact"] is not None else None
        if verdict != t["expect"] or found != want_found:
            bad.append(f"tails/{t['name']}: got {verdict} next={found}, "
                       f"want {t['expect']} next={want_found}")

    for line in bad:
        print("MISMATCH", line)
    print(f"{total - len(bad)}/{total} journal vectors agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
