#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# Do two builds of stepblame say the same thing about the same traces?
# A refactoring that must not change behaviour is checked with it: every
# trace in DIR is reported by both binaries in every format (text, json,
# jsonl, perfetto) and dumped (text and jsonl), and the outputs are compared
# byte for byte.
#
#   tests/same_reports.sh OLD_STEPBLAME NEW_STEPBLAME DIR
#   tests/same_reports.sh --record STEPBLAME DIR     (root) fill DIR with
#       traces: one `demo --keep` per scenario, plus the fuzz seed traces
#       when build/fuzz/seeds exists
set -u
if [ "${1:-}" = --record ]; then
	sb=$2 dir=$3
	mkdir -p "$dir"
	for sc in $("$sb" demo --help | awk '/^scenarios:/{on=1; next} on && /^  [a-z]/{print $1}'); do
		rm -rf "$dir/demo-$sc"
		"$sb" demo --scenario "$sc" --keep "$dir/demo-$sc" >/dev/null 2>&1 ||
			echo "same_reports: demo --scenario $sc failed" >&2
		mv "$dir/demo-$sc"/*.sbt "$dir/$sc.sbt" 2>/dev/null
		rm -rf "$dir/demo-$sc"
	done
	for f in "${SEEDS:-build/fuzz/seeds}"/trace/*; do
		[ -f "$f" ] && cp "$f" "$dir/seed-$(basename "$f").sbt"
	done
	ls "$dir" | wc -l
	exit 0
fi
old=$1 new=$2 dir=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
for t in "$dir"/*.sbt; do
	for how in "report:--format:text" "report:--format:json" "report:--format:jsonl" \
		   "report:--format:perfetto" "dump" "dump:--jsonl"; do
		IFS=: read -r -a args <<<"$how"
		"$old" "${args[0]}" "$t" "${args[@]:1}" >"$tmp/a" 2>"$tmp/ae"; ra=$?
		"$new" "${args[0]}" "$t" "${args[@]:1}" >"$tmp/b" 2>"$tmp/be"; rb=$?
		how=${how//:/ }
		n=$((n + 1))
		if [ $ra != $rb ] || ! cmp -s "$tmp/a" "$tmp/b" || ! cmp -s "$tmp/ae" "$tmp/be"; then
			bad=$((bad + 1))
			echo "DIFFERS: $(basename "$t") $how (exit $ra vs $rb)"
			diff "$tmp/a" "$tmp/b" | head -5
			diff "$tmp/ae" "$tmp/be" | head -5
		fi
	done
done
echo "$n outputs compared, $bad differ"
[ $bad = 0 ]
