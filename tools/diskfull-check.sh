#!/usr/bin/env bash
# Disk full and read-only: a ledger on a 24 MiB tmpfs is filled to the last byte. Every later command must
# fail cleanly (exit 2) or read without writing; nothing acknowledged may be lost, and once
# space is freed both copies verify against a checkpoint taken before. Needs `mount` (root
# in a container that allows tmpfs); prints SKIPPED and exits 0 where that is not possible.
# Usage: tools/diskfull-check.sh [path/to/ledger-binary]
set -uo pipefail
B=${1:-target/debug/ledger}
B=$(realpath "$B")
EX=$(realpath "$(dirname "$0")/../examples/lifecycle.jsonl")
M=$(mktemp -d)
if ! mount -t tmpfs -o size=24M tmpfs "$M" 2>/dev/null; then
    echo "diskfull-check: SKIPPED (cannot mount a tmpfs here)"; rmdir "$M"; exit 0
fi
trap 'umount "$M"; rmdir "$M"' EXIT
fail() { echo "diskfull-check: FAILED: $*"; exit 1; }
L=$M/l
"$B" init "$L" >/dev/null || fail init
"$B" submit "$L" "$EX" >/dev/null || fail submit
"$B" checkpoint "$L" >"$M.cp.json" || fail checkpoint
before=$("$B" export "$L" | wc -l)
dd if=/dev/zero of="$M/fill" bs=1M count=64 2>/dev/null   # fills the filesystem
for round in 1 2 3; do
    "$B" submit "$L" "$EX" >/dev/null 2>"$M.err"; rc=$?
    [ $rc -eq 2 ] || fail "submit on a full disk exited $rc, not 2: $(cat "$M.err")"
    [ "$(wc -l <"$M.err")" -eq 1 ] || fail "submit error is not one line: $(cat "$M.err")"
    "$B" verify "$L" >"$M.out" 2>&1 || fail "verify on a full disk: $(cat "$M.out")"
    grep -q "journal only" "$M.out" || fail "verify does not say sled was not verified: $(cat "$M.out")"
    "$B" replay "$L" >/dev/null 2>&1 || fail "replay on a full disk"
    "$B" show "$L" 0 >/dev/null 2>&1 || fail "show on a full disk"
    [ "$("$B" export "$L" | wc -l)" -eq "$before" ] || fail "export on a full disk"
done
rm -f "$M/fill"
"$B" verify "$L" --checkpoint "$M.cp.json" >"$M.out" 2>&1 || fail "after freeing space: $(cat "$M.out")"
grep -q "journal and sled" "$M.out" || fail "sled not verified after freeing space: $(cat "$M.out")"
[ "$("$B" export "$L" | wc -l)" -eq "$before" ] || fail "entries lost"
"$B" submit "$L" "$EX" >/dev/null 2>&1; [ $? -le 1 ] || fail "the ledger does not accept commands after freeing space"
# Read-only mount (an auditor's snapshot): every command is an I/O error (exit 2) naming the
# OS reason, never a verification failure; `verify` gives the journal's own verdict in that
# line (outside reviews 190 F3, 192 F3); reading the journal alone still works.
mount -o remount,ro "$M" || fail "remount read-only"
"$B" verify "$L" >/dev/null 2>"$M.err"; rc=$?
[ $rc -eq 2 ] && grep -q "the journal alone verified" "$M.err" \
    || { mount -o remount,rw "$M"; fail "verify on a read-only mount exited $rc: $(cat "$M.err")"; }
for c in submit recover; do
    "$B" $c "$L" </dev/null >/dev/null 2>"$M.err"; rc=$?
    [ $rc -eq 2 ] || { mount -o remount,rw "$M"; fail "$c on a read-only mount exited $rc: $(cat "$M.err")"; }
    grep -q "Read-only file system" "$M.err" || { mount -o remount,rw "$M"; fail "$c does not name the OS reason: $(cat "$M.err")"; }
done
"$B" replay "$L" --journal-only >/dev/null 2>&1 || { mount -o remount,rw "$M"; fail "replay --journal-only on a read-only mount"; }
mount -o remount,rw "$M"
rm -f "$M.cp.json" "$M.out" "$M.err"
echo "diskfull-check: ok ($before entries kept; 3 rounds of submit/verify/replay/show/export on a full disk; read-only mount: exit 2 with the OS reason, verify giving the journal's verdict)"
