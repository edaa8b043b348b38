#!/usr/bin/env bash
# measure.sh BINARY OUTDIR [NAME...]: issue 29's yield measurement on real repositories (README,
# "Real repositories"). Not a test: the repositories are public code fetched by hand, never
# committed. REPOS (env, required) is a folder with one checkout per repository, named by the
# second part of its repos.txt line (owner+name -> name; e.g. `git --git-dir=MIRROR archive COMMIT |
# tar -x -C $REPOS/name`). For each repository of repos.txt (or the NAMEs given):
#  (a) natively (Debian's /usr/bin/python3 + pytest, no sandbox), in a throwaway copy: collects
#      the tests in pytest's order (unittest discovery when pytest collects none, as ndtrace's
#      unittest runner does), runs the first MAX_TESTS and records each outcome -> OUTDIR/native/
#  (b) BINARY run --spec (a repository source: the local folder, max_tests MAX_TESTS, defaults
#      otherwise: functions true, reexecute true) -> OUTDIR/ds/<name>/, wall time in <name>.secs
#  (c) BINARY inspect --rows 0 dumps the rows (headers name each row's source_id = test id)
# then analyze.py prints the table, totals and loss reasons (also OUTDIR/table.txt).
# Sequential on purpose (2 shared cores).
set -u
BIN=$(readlink -f "${1:?usage: measure.sh BINARY OUTDIR [NAME...]}")
OUT=$(mkdir -p "${2:?usage: measure.sh BINARY OUTDIR [NAME...]}" && readlink -f "$2")
shift 2
H=$(dirname "$(readlink -f "$0")")   # this folder: the helpers and repos.txt
REPOS=${REPOS:?set REPOS to the folder of checkouts (see the header)}
MAX_TESTS=${MAX_TESTS:-40}
PY=/usr/bin/python3
if [ $# -gt 0 ]; then NAMES=("$@"); else mapfile -t NAMES < <(grep -v '^#' "$H/repos.txt" | awk 'NF{sub(/^[^+]*\+/, "", $1); print $1}'); fi
mkdir -p "$OUT/native" "$OUT/ds"
for name in "${NAMES[@]}"; do
  src=$REPOS/$name
  [ -d "$src" ] || { echo "no checkout $src" >&2; continue; }
  echo "[$(date -u +%T)] $name: native run" >&2
  tmp=$(mktemp -d /tmp/measure-native.XXXXXX)
  cp -a "$src/." "$tmp/"
  pp=$H
  [ -d "$tmp/src" ] && pp=$pp:$tmp/src
  ( cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 PYTHONPATH=$pp MEASURE_OUT=$OUT/native/$name.json \
      MEASURE_MAX=$MAX_TESTS timeout 900 $PY -m pytest -p measure_plugin -p no:cacheprovider \
      --rootdir "$tmp" --continue-on-collection-errors -q >"$OUT/native/$name.pytest.log" 2>&1 )
  ncol=$($PY -c "import json,sys;print(len(json.load(open(sys.argv[1]))['collected']))" "$OUT/native/$name.json" 2>/dev/null || echo 0)
  if [ "$ncol" = 0 ]; then
    ( cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 PYTHONPATH=${pp#$H} \
        timeout 900 $PY $H/native_unittest.py "$OUT/native/$name.json" "$MAX_TESTS" \
        >"$OUT/native/$name.unittest.log" 2>&1 )
  fi
  rm -rf "$tmp"

  echo "[$(date -u +%T)] $name: ndtrace run" >&2
  ds=$OUT/ds/$name
  rm -rf "$ds"
  cat >"$OUT/ds/$name.yaml" <<YAML
name: measure-$name
output: $ds
sources:
  - kind: repository
    url: $src
    max_tests: $MAX_TESTS
created_at: 2026-11-28T00:00:00Z
YAML
  t0=$(date +%s)
  "$BIN" run --spec "$OUT/ds/$name.yaml" >"$OUT/ds/$name.log" 2>&1
  echo "rc=$? " >>"$OUT/ds/$name.log"
  echo $(( $(date +%s) - t0 )) >"$OUT/ds/$name.secs"
  "$BIN" inspect "$ds" --rows 0 --color never >"$OUT/ds/$name.inspect.txt" 2>&1
  # A suite whose order depends on the file system (tests generated from os.walk/listdir) is
  # collected in another order in ndtrace's checkout: when some test with rows is not among the
  # native first MAX_TESTS, run the whole suite natively too (native/<name>.full.json).
  if ! $PY - "$OUT" "$name" <<'PYX'
import json, re, sys
out, name = sys.argv[1:]
run = set(json.load(open("%s/native/%s.json" % (out, name))).get("run") or [])
hdr = re.compile(r"^id=\S+ level=repository .*? source=(.*) repo=\S+ tokenizer=")
ids = {m.group(1) for m in map(hdr.match, open("%s/ds/%s.inspect.txt" % (out, name), errors="replace")) if m}
sys.exit(1 if ids - run else 0)
PYX
  then
    echo "[$(date -u +%T)] $name: collection order differs from ndtrace's: native run of the whole suite" >&2
    tmp=$(mktemp -d /tmp/measure-native.XXXXXX); cp -a "$src/." "$tmp/"
    ( cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 PYTHONPATH=$pp MEASURE_OUT=$OUT/native/$name.full.json \
        MEASURE_MAX=100000000 timeout 900 $PY -m pytest -p measure_plugin -p no:cacheprovider \
        --rootdir "$tmp" --continue-on-collection-errors -q >"$OUT/native/$name.full.log" 2>&1 )
    rm -rf "$tmp"
  fi
done
$PY $H/analyze.py "$OUT" "${NAMES[@]}" | tee "$OUT/table.txt"
