#!/bin/sh
# The man pages, made from the commands' own --help text (one source for both):
#   dist/mkman.sh STEPBLAME OUTDIR
# writes OUTDIR/stepblame.1 and OUTDIR/stepblame-COMMAND.1 for each command.
# The same binary gives the same pages (no date in them).
set -eu
sb=$1 out=$2
ver=$("$sb" -V | awk '{ print $2 }')
cmds="record report compare attach watch run demo dump"
mkdir -p "$out"

# a command's line in `stepblame --help`: its description column (from column 41),
# continued on the lines indented that far
summary() {
	"$sb" --help | awk -v c="$1" '
		/^  [a-z]/ {
			if (on) exit
			on = ($1 == c)
			# the description column, unless the synopsis runs into it
			if (on && length($0) > 40 && substr($0, 39, 2) == "  ") { d = substr($0, 41); sub(/^ +/, "", d); sub(/ +$/, "", d) }
			next
		}
		on && /^                                        / { x = $0; sub(/^ +/, "", x); d = d (d == "" ? "" : " ") x; next }
		on { exit }
		END { print d }'
}

# help text as roff: verbatim, backslashes escaped, no line taken for a request
roff() {
	sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

page() { # name, summary, help text on stdin, see-also list
	name=$1 sum=$2 also=$3
	{
		printf '.TH %s 1 "" "stepblame %s" "stepblame manual"\n' "$(printf %s "$name" | tr a-z A-Z)" "$ver"
		printf '.SH NAME\n%s \\- %s\n' "$name" "$(printf %s "$sum" | roff)"
		printf '.SH DESCRIPTION\n.nf\n'
		roff
		printf '.fi\n.SH SEE ALSO\n%s\n' "$also"
	} >"$out/$name.1"
}

all=""
for c in $cmds; do all="$all${all:+, }\\fBstepblame-$c\\fR(1)"; done
"$sb" --help | page stepblame "per-step blame for training jobs" "$all"
for c in $cmds; do
	"$sb" "$c" --help | page "stepblame-$c" "$(summary "$c")" "\\fBstepblame\\fR(1)"
done
