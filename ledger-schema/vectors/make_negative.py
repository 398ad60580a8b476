#!/usr/bin/env python3
"""Builds negative.json: inputs the strict decoder must refuse, each a small mutation of a
positive vector, written by an encoder independent of the Rust code. Rerun after the positive
vectors change (rows built on a later vector carry its new `prev`); the output is frozen. Each row names the DecodeError variant expected."""
import json, os, struct
import cbor2

here = os.path.dirname(os.path.abspath(__file__))
positives = {v["name"]: v for v in json.load(open(os.path.join(here, "positive.json")))}

def head(major, n, long=False):
    if long or n >= 2**32: return bytes([major << 5 | 27]) + struct.pack(">Q", n)
    if n < 24: return bytes([major << 5 | n])
    if n < 256: return bytes([major << 5 | 24, n])
    if n < 65536: return bytes([major << 5 | 25]) + struct.pack(">H", n)
    return bytes([major << 5 | 26]) + struct.pack(">I", n)

def canon_key(k):
    return enc(k, {})

def enc(v, opt, path=()):
    """Canonical encoder with deliberate deviations selected by `opt` at `path`."""
    here_opt = opt.get(path, set())
    if "raw" in here_opt: return opt[("raw", path)]
    if isinstance(v, bool): return b"\xf5" if v else b"\xf4"
    if isinstance(v, int):
        if "float" in here_opt: return b"\xfb" + struct.pack(">d", float(v))
        if "tag" in here_opt: return head(6, 1) + enc(v, {})
        return head(0, v, "long" in here_opt) if v >= 0 else head(1, -1 - v, "long" in here_opt)
    if isinstance(v, bytes): return head(2, len(v), "long" in here_opt) + v
    if isinstance(v, str):
        b = v.encode()
        if "indef" in here_opt and len(b) > 1:
            return b"\x7f" + head(3, 1) + b[:1] + head(3, len(b) - 1) + b[1:] + b"\xff"
        return head(3, len(b), "long" in here_opt) + b
    if isinstance(v, list):
        items = b"".join(enc(x, opt, path + (i,)) for i, x in enumerate(v))
        return (b"\x9f" + items + b"\xff") if "indef" in here_opt else head(4, len(v)) + items
    if isinstance(v, dict):
        pairs = sorted(((canon_key(k), k) for k in v), key=lambda p: p[0])
        if "reorder" in here_opt: pairs.reverse()
        body = b""
        for kb, k in pairs:
            if ("rawkey", path, k) in opt:
                kb = opt[("rawkey", path, k)]
            if "longkey" in here_opt and k == opt[("longkey", path)]:
                kb = head(3, len(k.encode()), True) + k.encode()
            body += kb + enc(v[k], opt, path + (k,))
            if "dupkey" in here_opt and k == opt[("dupkey", path)]:
                body += kb + enc(v[k], opt, path + (k,))
        n = len(pairs) + (1 if "dupkey" in here_opt else 0)
        return (b"\xbf" + body + b"\xff") if "indef" in here_opt else head(5, n) + body
    raise TypeError(v)

def base(name):
    return cbor2.loads(bytes.fromhex(positives[name]["hex"]))

rows = []
def add(name, raw, error):
    rows.append({"name": name, "hex": raw.hex(), "error": error})

g = base("ledger_initialized")
goal = base("goal_created")
assert enc(g, {}) == bytes.fromhex(positives["ledger_initialized"]["hex"]), "encoder is not canonical"
assert enc(goal, {}) == bytes.fromhex(positives["goal_created"]["hex"])

add("long_form_integer", enc(g, {("seq",): {"long"}}), "NonShortest")
add("long_form_length_string", enc(g, {("event", "ledgerInitialized", "label"): {"long"}}), "NonShortest")
add("long_form_length_key", enc(g, {(): {"longkey"}, ("longkey", ()): "prev"}), "NonShortest")
add("indefinite_map", enc(g, {(): {"indef"}}), "Indefinite")
add("indefinite_array", enc(goal, {("event", "goalCreated", "content", "scope"): {"indef"}}), "Indefinite")
add("indefinite_string", enc(g, {("event", "ledgerInitialized", "label"): {"indef"}}), "Indefinite")
add("reordered_keys", enc(g, {(): {"reorder"}}), "KeyOrder")
add("reordered_nested_keys", enc(goal, {("event", "goalCreated", "content"): {"reorder"}}), "KeyOrder")
unknown = base("ledger_initialized"); unknown["event"]["ledgerInitialized"]["extra"] = 0
add("unknown_key", enc(unknown, {}), "UnknownField")
unknown_kind = base("ledger_initialized"); unknown_kind["event"] = {"ledgerDeleted": {}}
add("unknown_event_kind", enc(unknown_kind, {}), "UnknownField")
add("duplicate_key", enc(g, {(): {"dupkey"}, ("dupkey", ()): "seq"}), "DuplicateKey")
add("trailing_byte", enc(g, {}) + b"\x00", "TrailingBytes")
add("tag", enc(g, {("timeMs",): {"tag"}}), "Tag")
add("float", enc(g, {("timeMs",): {"float"}}), "Float")
null_opt = base("workflow_started_plain"); null_opt["event"]["workflowStarted"]["plan"] = None
add("null_for_absent_optional", cbor2.dumps(null_opt, canonical=True), "Simple")
v2 = base("ledger_initialized"); v2["v"] = 2
add("unsupported_version", enc(v2, {}), "UnsupportedVersion")
short_digest = base("ledger_initialized"); short_digest["prev"] = bytes(31)
add("short_digest", enc(short_digest, {}), "Schema")
missing = base("ledger_initialized"); del missing["timeMs"]
add("missing_field", enc(missing, {}), "Schema")
add("truncated", enc(g, {})[:-3], "Truncated")

# The rest of the canonical profile (docs/format.md, "Canonical profile"). Each row replaces
# one item of a positive vector by raw bytes.
def raw(name, at, data, error, base_name="ledger_initialized"):
    add(name, enc(base(base_name), {at: {"raw"}, ("raw", at): data}), error)

LABEL = ("event", "ledgerInitialized", "label")
raw("invalid_utf8_text", LABEL, b"\x66sampl\xff", "Schema")
raw("overlong_utf8_text", LABEL, b"\x62\xc0\xaf", "Schema")
raw("utf16_surrogate_text", LABEL, b"\x63\xed\xa0\x80", "Schema")
raw("negative_integer", ("seq",), b"\x20", "Schema")
# serde_cbor reads a byte string holding valid UTF-8 into a text field, and an unsigned
# integer map key as the index of a struct field: both decode, and the final re-encoding
# (which writes a text string / the field's text key) differs, so they are refused there.
raw("byte_string_for_text", LABEL, b"\x46sample", "NonCanonical")
raw("text_for_byte_string", ("ledger",), b"\x70" + b"0" * 16, "Schema")
raw("reserved_additional_info_28", ("seq",), b"\x1c", "Malformed")
raw("reserved_additional_info_29", ("seq",), b"\x3d", "Malformed")
raw("reserved_additional_info_30", LABEL, b"\x7e", "Malformed")
raw("indefinite_integer", ("seq",), b"\x1f", "Malformed")
raw("stray_break", ("seq",), b"\xff", "Malformed")
raw("reserved_simple_28", ("seq",), b"\xfc", "Simple")
raw("undefined", ("seq",), b"\xf7", "Simple")
raw("two_byte_simple", ("seq",), b"\xf8\x20", "Simple")
raw("half_float", ("seq",), b"\xf9\x00\x00", "Float")
raw("tag_reserved_info", ("timeMs",), b"\xdc", "Tag")
# Depth: the entry map is depth 0, the label value depth 3, so the 30th nested array is at
# depth 32 (refused by the walk) and 29 nested arrays pass the walk (then fail the schema).
raw("too_deep", LABEL, b"\x81" * 30 + b"\x00", "TooDeep")
raw("depth_31_passes_the_walk", LABEL, b"\x81" * 29 + b"\x00", "Schema")
raw("integer_out_of_range", ("event", "ledgerInitialized", "catalog"), b"\x1a\x00\x01\x11\x70", "Schema")
raw("unknown_enum_value", ("event", "phaseAdvanced", "phase"), b"\x63FOO", "UnknownField", "phase_advanced")
# serde_cbor also parses the text form of an id or digest where the bytes belong; the
# re-encoding is the byte string, so it is refused at the end.
raw("ulid_text_for_id", ("ledger",), b"\x78\x1a01J00000000000000000000001", "NonCanonical")
int_key = base("ledger_initialized")
add("integer_key", enc(int_key, {("rawkey", ("event", "ledgerInitialized"), "label"): b"\x00"}), "NonCanonical")
add("byte_string_key", enc(int_key, {("rawkey", ("event", "ledgerInitialized"), "label"): b"\x45label"}), "NonCanonical")
add("array_key", enc(int_key, {("rawkey", ("event", "ledgerInitialized"), "catalog"): b"\x81\x00"}), "Schema")
add("invalid_utf8_key", enc(int_key, {("rawkey", ("event", "ledgerInitialized"), "label"): b"\x65labe\xff"}), "Schema")

json.dump(rows, open(os.path.join(here, "negative.json"), "w"), indent=2)
open(os.path.join(here, "negative.json"), "a").write("\n")
print(f"{len(rows)} negative vectors")
