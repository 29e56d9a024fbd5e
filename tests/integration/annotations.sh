#!/bin/bash
# Annotations (as pgBackRest's): `backup --annotation key=value`, repeatable, kept in the
# backup's manifest and shown by `info` (text: an "annotations:" line; JSON: an object,
# {} for a backup without any, per docs/info.schema.json). A malformed or repeated key is
# a usage error that writes no backup. A reader that predates annotations skips the field
# (PB_OLD_BIN, when given, reads the annotated repository).
source "$(dirname "$0")/pb_lib.sh"
pb_setup
pb_source_cluster
pg_psql "$SRC" "CREATE TABLE t AS SELECT generate_series(1, 100) AS n" >/dev/null
ann() { pb info --json | python3 -c "
import json, sys
for b in json.load(sys.stdin)['backups']:
    if b['id'] == sys.argv[1]:
        print(json.dumps(b.get('annotations'), sort_keys=True))" "$1"; }
count() { pb info --json | python3 -c "import json, sys; print(len(json.load(sys.stdin)['backups']))"; }

pb_check "full backup with two annotations" pb_backup_logged --type full --checkpoint fast \
    --annotation source=nightly --annotation "ticket=OPS-12 \"drill\" a=b"
F=$(pb_last_id)
pb_check "incremental without annotations" pb_backup_logged --checkpoint fast
I=$(pb_last_id)
pb_assert_eq "$(ann "$F")" '{"source": "nightly", "ticket": "OPS-12 \"drill\" a=b"}' \
    "info --json shows the full's annotations"
pb_assert_eq "$(ann "$I")" '{}' "info --json shows {} for a backup without annotations"
out=$(pb info)
grep -q "^    annotations: source=nightly, ticket=OPS-12 \"drill\" a=b\$" <<<"$out" &&
    pb_test_ok "info text shows the annotations" || pb_test_fail "info text: $out"
pb_assert_eq "$(grep -c "annotations:" <<<"$out")" 1 "info text shows none for the incremental"
pb_report_dir
pb info --json >"$OUT/info.json"
python3 "$PB_SRCDIR/tests/integration/schema_check.py" "$PB_SRCDIR/docs/info.schema.json" \
    "$OUT/info.json" && pb_test_ok "info --json follows docs/info.schema.json" ||
    pb_test_fail "info --json does not follow its schema"

# ---- refused: nothing is written
for bad in "novalue" "=x" "bad key=x" "k=line$(printf '\t')tab"; do
    out=$(pb backup --checkpoint fast --annotation "$bad" 2>&1)
    rc=$?
    [ "$rc" = 2 ] && grep -q -- "--annotation" <<<"$out" &&
        pb_test_ok "--annotation '$bad' is a usage error" || pb_test_fail "'$bad': rc $rc: $out"
done
out=$(pb backup --checkpoint fast --annotation k=1 --annotation k=2 2>&1)
[ "$?" = 2 ] && grep -q "given twice" <<<"$out" && pb_test_ok "a key given twice is refused" ||
    pb_test_fail "duplicate key: $out"
pb_assert_eq "$(count)" 2 "refused backups write nothing"

pb_check "verify the annotated repository" pb verify
if [ -n "${PB_OLD_BIN:-}" ]; then
    _pb_as_pg "$PB_OLD_BIN" info "${PB_REPO_ARGS[@]}" --state-dir "$PB_STATE" >/dev/null 2>&1 &&
        pb_test_ok "a reader without annotations reads the repository" ||
        pb_test_fail "the older reader fails on annotations"
fi
pg_stop "$SRC"
pb_test_summary
