# bash completion for stepblame: commands, each command's options (read from its
# own --help, so they never drift from the binary), PIDs after -p, the trainer's
# trace files (.sbtrace, .sbtrace.zst; .sbt of older versions) after report and dump, scenario names after demo --scenario.
_stepblame() {
	local cur prev cmd words
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=${COMP_WORDS[1]:-}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "record report compare attach watch run demo dump help --version --help" -- "$cur"))
		return
	fi
	case $prev in
	-p|--pid)
		COMPREPLY=($(compgen -W "$(ps -e -o pid= 2>/dev/null)" -- "$cur")); return ;;
	--scenario)
		words=$("${COMP_WORDS[0]}" demo --help 2>/dev/null | awk '/^scenarios:/{on=1; next} on && /^  [a-z]/{print $1}')
		COMPREPLY=($(compgen -W "$words" -- "$cur")); return ;;
	-f|--format)
		COMPREPLY=($(compgen -W "text json jsonl perfetto html" -- "$cur")); return ;;
	-o|--output|--jsonl|--json|--html|--dir|--cgroup|--ckpt-dir)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	case $cmd in
	help)
		COMPREPLY=($(compgen -W "record report compare attach watch run demo dump" -- "$cur")); return ;;
	run)
		# after --, the command to launch
		local i
		for ((i = 2; i < COMP_CWORD; i++)); do
			if [ "${COMP_WORDS[i]}" = -- ]; then COMPREPLY=($(compgen -c -- "$cur")); return; fi
		done ;;
	esac
	if [[ $cur == -* ]]; then
		words=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[a-zA-Z][a-zA-Z0-9-]*' | tr -d ' ,' | sort -u)
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	elif [ "$cmd" = report ] || [ "$cmd" = compare ] || [ "$cmd" = dump ]; then
		COMPREPLY=($(compgen -f -X '!*.@(sbtrace|sbtrace.zst|sbt|sbt.zst)?(.old)' -- "$cur") $(compgen -d -- "$cur"))
	fi
}
complete -F _stepblame stepblame
