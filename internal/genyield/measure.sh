#!/usr/bin/env bash
# measure.sh: issue 30's yield and throughput figures, measured through the real pipeline
# (`ndtrace run`, sandboxed, embedded Temporal server), not the engine's standalone harness.
#
# Usage (from the repository root):
#
#   go build -o /tmp/ndt-measure ./cmd/ndtrace
#   go build -o /tmp/ndt-gysum ./internal/genyield/summarize
#   internal/genyield/measure.sh yield      BIN SUM REPOS OUT [LIB ...]
#   internal/genyield/measure.sh repo       BIN SUM REPOS OUT [LIB ...]
#   internal/genyield/measure.sh jsonl      BIN SUM REPOS OUT [LIB ...]
#   internal/genyield/measure.sh throughput BIN SUM REPOS OUT CRUXEVAL.jsonl
#
# BIN is the ndtrace binary, SUM the summariser (internal/genyield/summarize), REPOS a folder
# holding the real libraries' checkouts (toolz, idna, python-json-pointer, python-webencodings,
# cachetools, jmespath.py, six, sqlparse, more-itertools, pycparser; absent ones are skipped), OUT
# a scratch folder for the staged packages, specs, datasets and results (not under /tmp: ndtrace's
# scratch rules). The fixtures internal/testrepos/genlibs/{textkit,numkit,structs,parsekit} are
# always measured.
#
#   yield:      one `ndtrace run` per library with a `kind: files` source over a staged copy of
#               its package modules only (OUT/stage/LIB/PKG/..., tests, docs and test_*.py left
#               out: the package keeps its name, so its imports work), then `ndtrace stats --json`;
#               prints one table row per library and a total (SUM).
#   repo:       the same staged folders as `kind: repository` sources (url: the folder) with
#               `functions: all`: the whole package is one checkout (a files source groups the
#               files of one directory, at most files_per_item, into one item).
#   jsonl:      the same staged files as one JSONL shard per library (content, path, repo
#               columns) read by a files source with path_column, repo_column and files_per_item
#               64: the files of one repository are one item, as a corpus with a repository column
#               gives them.
#   throughput: the same machine and settings, two runs: CruxEval (kind jsonl, limit 400: items
#               whose inputs are given) and files sources over the fixtures and a few libraries
#               (generated inputs), then the latter with reexecute: false; prints items/s of each.
#
# Every run: trajectories_per_trace 1, directions the default (forward, inverse), parallelism the
# default. The libraries' code runs in ndtrace's sandbox only. Nothing here is committed data: the
# third-party code stays in REPOS and OUT.
set -euo pipefail

mode=${1:?mode: yield, repo, jsonl or throughput}
bin=$(realpath "${2:?ndtrace binary}")
sum=$(realpath "${3:?summariser binary}")
repos=$(realpath "${4:?folder of the checkouts}")
out=${5:?output folder}
shift 5
mkdir -p "$out"
out=$(realpath "$out")
here=$(cd "$(dirname "$0")" && pwd)
genlibs=$here/../testrepos/genlibs

# pkgof LIB: the package (folder or module) of a library, relative to its checkout.
pkgof() {
	case $1 in
	toolz) echo toolz/toolz ;;
	idna) echo idna/idna ;;
	python-json-pointer) echo python-json-pointer/jsonpointer.py ;;
	python-webencodings) echo python-webencodings/webencodings ;;
	cachetools) echo cachetools/src/cachetools ;;
	jmespath.py) echo jmespath.py/jmespath ;;
	six) echo six/six.py ;;
	sqlparse) echo sqlparse/sqlparse ;;
	more-itertools) echo more-itertools/more_itertools ;;
	pycparser) echo pycparser/pycparser ;;
	textkit | numkit | structs | parsekit) echo "genlibs:$1" ;;
	*) return 1 ;;
	esac
}

fixtures=(textkit numkit structs parsekit)
reallibs=(toolz idna python-json-pointer python-webencodings cachetools jmespath.py six sqlparse more-itertools pycparser)

# stage LIB: copies LIB's package modules (.py files; no tests/, test/, docs/, test_*.py,
# *_test.py, conftest.py, setup.py) to OUT/stage/LIB/PKG and prints OUT/stage/LIB.
stage() {
	local lib=$1 src dst
	src=$(pkgof "$lib")
	if [[ $src == genlibs:* ]]; then
		src=$genlibs/${src#genlibs:}
	else
		src=$repos/$src
	fi
	[[ -e $src ]] || return 1
	dst=$out/stage/$lib
	rm -rf "$dst"
	mkdir -p "$dst"
	if [[ -f $src ]]; then
		cp "$src" "$dst/"
	else
		local base
		base=$(basename "$src")
		(cd "$(dirname "$src")" && find "$base" \( -name tests -o -name test -o -name docs -o -name doc -o -name __pycache__ \) -prune -o \
			-type f -name '*.py' ! -name 'test_*.py' ! -name '*_test.py' ! -name conftest.py ! -name setup.py -print0 |
			xargs -0 cp --parents -t "$dst")
	fi
	echo "$dst"
}

# runspec NAME SPEC: runs `ndtrace run` on SPEC (its output OUT/data/NAME), keeps its log, its wall
# time (seconds, in OUT/res/NAME.wall) and `ndtrace stats --json` (OUT/res/NAME.json).
runspec() {
	local name=$1 spec=$2 t0 t1
	mkdir -p "$out/res"
	rm -rf "$out/data/$name"
	t0=$(date +%s.%N)
	"$bin" run --spec "$spec" >"$out/res/$name.log" 2>&1 || {
		echo "run $name failed: see $out/res/$name.log" >&2
		return 1
	}
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc >"$out/res/$name.wall"
	"$bin" stats --json "$out/data/$name" >"$out/res/$name.json"
}

header='created_at: 2026-11-22T00:00:00Z
trajectories_per_trace: 1'

# perlib KIND LIB...: the yield of each library through one run each.
perlib() {
	local kind=$1 lib dir name args=()
	shift
	for lib in "$@"; do
		dir=$(stage "$lib") || {
			echo "skipping $lib: not found" >&2
			continue
		}
		name=$kind-$lib
		mkdir -p "$out/spec"
		if [[ $kind == jsonl ]]; then
			# one object per file: its text, its path in the staged folder, the library
			python3 -c 'import json, os, sys
root, lib = sys.argv[1], sys.argv[2]
for d, dirs, files in sorted(os.walk(root)):
    dirs.sort()
    for f in sorted(files):
        p = os.path.join(d, f)
        with open(p, encoding="utf-8") as fh:
            print(json.dumps({"content": fh.read(), "path": os.path.relpath(p, root), "repo": lib}))' \
				"$dir" "$lib" >"$out/spec/$name.jsonl"
			printf 'name: %s\noutput: %s\n%s\nsources:\n  - kind: files\n    path: %s\n    path_column: path\n    repo_column: repo\n    files_per_item: 64\n' \
				"$name" "$out/data/$name" "$header" "$out/spec/$name.jsonl" >"$out/spec/$name.yaml"
		elif [[ $kind == files ]]; then
			printf 'name: %s\noutput: %s\n%s\nsources:\n  - kind: files\n    path: %s\n' \
				"$name" "$out/data/$name" "$header" "$dir" >"$out/spec/$name.yaml"
		else
			printf 'name: %s\noutput: %s\n%s\nsources:\n  - kind: repository\n    url: %s\n    functions: all\n' \
				"$name" "$out/data/$name" "$header" "$dir" >"$out/spec/$name.yaml"
		fi
		runspec "$name" "$out/spec/$name.yaml" || continue
		args+=("$lib=$out/res/$name.json:$(cat "$out/res/$name.wall")")
	done
	"$sum" yield "${args[@]}"
}

case $mode in
yield | repo | jsonl)
	kind=files
	[[ $mode == yield ]] || kind=$mode
	libs=("$@")
	((${#libs[@]})) || libs=("${fixtures[@]}" "${reallibs[@]}")
	perlib "$kind" "${libs[@]}"
	;;
throughput)
	crux=$(realpath "${1:?CruxEval jsonl}")
	mkdir -p "$out/spec"
	printf 'name: tp-given\noutput: %s\n%s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 400\n' \
		"$out/data/tp-given" "$header" "$crux" >"$out/spec/tp-given.yaml"
	runspec tp-given "$out/spec/tp-given.yaml"
	for re in true false; do
		name=tp-generated
		[[ $re == false ]] && name=tp-generated-noreexec
		{
			printf 'name: %s\noutput: %s\n%s\nsources:\n' "$name" "$out/data/$name" "$header"
			for lib in "${fixtures[@]}" idna jmespath.py cachetools; do
				dir=$(stage "$lib") || continue
				printf '  - kind: files\n    path: %s\n    reexecute: %s\n' "$dir" "$re"
			done
		} >"$out/spec/$name.yaml"
		runspec "$name" "$out/spec/$name.yaml"
	done
	"$sum" throughput "given=$out/res/tp-given.json:$(cat "$out/res/tp-given.wall")" \
		"generated=$out/res/tp-generated.json:$(cat "$out/res/tp-generated.wall")" \
		"generated-noreexec=$out/res/tp-generated-noreexec.json:$(cat "$out/res/tp-generated-noreexec.wall")"
	;;
*)
	echo "mode: yield, repo, jsonl or throughput" >&2
	exit 2
	;;
esac
