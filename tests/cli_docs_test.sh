#!/usr/bin/env bash
# The manual pages (docs/man) and the shell completions (completions/) against
# what `walcut --help` says: every command of `walcut --help` (and of `walcut
# cut --help`, `walcut snapshot --help`) has its manual page and its place in
# both completions, and each names exactly the options that command's --help
# lists, with exactly the values --help allows where it lists them
# ({text,json}). Then the pages render without a groff warning, and the bash
# completion completes commands, options and option values.
#
#   tests/cli_docs_test.sh WALCUT_BIN SOURCE_DIR
set -euo pipefail
w=$1
src=$(cd "$2" && pwd)
bash_file=$src/completions/walcut.bash
zsh_file=$src/completions/_walcut
man=$src/docs/man
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

# The subcommands a --help lists, and the options (short and long) it lists.
subcommands() { "$w" "$@" --help | sed -n '/^Subcommands:/,$p' | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p'; }
help_options() {
  "$w" "$@" --help | sed -n '/^Options:/,/^Subcommands:/p' | sed -nE 's/^  (-[^ ]*).*/\1/p' |
    tr ',' '\n' | sed -E 's/[=:].*//' | grep -E '^--?[a-zA-Z]' | sort -u
}
words_sorted() { tr ' ' '\n' | grep -v '^$' | sort -u; }
same() {  # WHAT EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then
    bad "$1: --help lists [$(echo $2)], it lists [$(echo $3)]"
  fi
}

# Every command path: "" (walcut itself), then each subcommand and, for the
# commands that have subcommands, theirs.
paths=("")
for c in $(subcommands); do
  paths+=("$c")
  for s in $(subcommands "$c"); do paths+=("$c $s"); done
done
[ ${#paths[@]} -gt 10 ] || bad "only ${#paths[@]} commands found in $w --help"

for p in "${paths[@]}"; do
  # shellcheck disable=SC2086
  want=$(help_options $p)
  label="walcut${p:+ $p}"

  # bash: the line of _walcut_options for this command.
  if [ -z "$p" ]; then key='""'; elif [[ $p == *" "* ]]; then key="\"$p\""; else key=$p; fi
  line=$(grep -F "    $key) echo \"" "$bash_file" | head -1 || true)
  if [ -z "$line" ]; then
    bad "$label: no line in $bash_file (_walcut_options)"
  else
    same "$label in $bash_file" "$want" "$(echo "$line" | sed -E 's/.*echo "([^"]*)".*/\1/' | words_sorted)"
  fi

  # zsh: the function _walcut_<command> (its descriptions in [...] left out).
  fn="_walcut${p:+_${p// /_}}"
  body=$(sed -n "/^$fn() {\$/,/^}\$/p" "$zsh_file" | sed -E 's/\[[^]]*\]//g; s/_arguments( -[sC])+//')
  if [ -z "$body" ]; then
    bad "$label: no function $fn in $zsh_file"
  else
    got=$(echo "$body" | grep -oE "(^|[^a-zA-Z0-9_-])--?[a-zA-Z][a-zA-Z0-9-]*" | sed -E 's/^[^-]//' | sort -u)
    same "$label in $zsh_file ($fn)" "$want" "$got"
  fi

  # The manual: walcut.1 for walcut itself, walcut-<command>.1 for a
  # command; a command of a command (cut show, snapshot check) is on its
  # parent's page, in a section of its own when it has siblings. Options are
  # the tags of .TP items.
  top=${p%% *}
  page=$man/walcut${top:+-$top}.1
  if [ ! -f "$page" ]; then
    bad "$label: no manual page $page"
    continue
  fi
  # shellcheck disable=SC2086
  if [ -n "$p" ] && [[ $p != *" "* ]] && [ -n "$(subcommands $p)" ] &&
     ! grep -qF ".SS \"walcut $p\"" "$page"; then
    continue  # cut, snapshot: the page documents their commands
  fi
  text=$(cat "$page")
  if [ -z "$p" ]; then
    text=$(sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$page")
  elif grep -q '^\.SS "walcut ' "$page"; then
    # restore, check: options of their own in a section beside their commands
    text=$(sed -n "/^\.SS \"walcut $p\"\$/,/^\.S[SH] /p" "$page")
    [ -n "$text" ] || { bad "$label: no section .SS \"walcut $p\" in $page"; continue; }
    text=$(echo "$text" | sed '$d')
  fi
  got=$(echo "$text" | awk 'prev == ".TP" { print } { prev = $0 }' | sed -E 's/\\f[BIR]//g; s/\\-/-/g' |
        grep -oE "(^|[ ,])--?[a-zA-Z][a-zA-Z0-9-]*" | sed -E 's/^[ ,]//' | sort -u)
  same "$label in $page" "$want" "$got"
done

# Options with a fixed set of values ("--format text|json:{text,json}" in
# --help): both completions offer exactly those values.
help_choices() {  # COMMAND... : "OPTION v1 v2 ..." per option with choices
  "$w" "$@" --help | sed -n '/^Options:/,/^Subcommands:/p' | sed -nE 's/^  (-[^ ]*) [^ ]*:\{([^}]*)\}.*/\1 \2/p' |
    while read -r names values; do echo "${names##*,} $(echo "$values" | tr ',' '\n' | sort | tr '\n' ' ')"; done
}
for p in "${paths[@]}"; do
  [ -n "$p" ] || continue
  # shellcheck disable=SC2086
  while read -r opt values; do
    [ -n "$opt" ] || continue
    want=$(echo $values)
    got=$(bash -c 'source "$1"; _walcut_values "$2" "$3"' _ "$bash_file" "$p" "$opt")
    got=$(echo $(echo "${got#words:}" | tr ' ' '\n' | grep -v '^$' | sort))
    [ "$got" = "$want" ] || bad "walcut $p $opt: --help offers [$want], $bash_file offers [$got]"
    fn="_walcut_${p// /_}"
    spec=$(sed -n "/^$fn() {\$/,/^}\$/p" "$zsh_file" | grep -F -- "$opt=" | head -1)
    got=$(echo $(echo "$spec" | sed -nE 's/.*:\(([^()]*)\).*/\1/p' | tr ' ' '\n' | grep -v '^$' | sort))
    [ "$got" = "$want" ] || bad "walcut $p $opt: --help offers [$want], $zsh_file ($fn) offers [$got]"
  done < <(help_choices $p)
done

# walcut.1 names every command; each has a page.
for c in $(subcommands); do
  grep -qE "^\.BR \"?$c[ \"]" "$man/walcut.1" || bad "walcut.1 does not list the command $c (.BR $c)"
  [ -f "$man/walcut-$c.1" ] || bad "no manual page walcut-$c.1"
done

# The pages render without warnings.
for page in "$man"/*.1; do
  out=$(LC_ALL=C groff -man -ww -z "$page" 2>&1 || true)
  [ -z "$out" ] || bad "groff warns about $page: $out"
done

# The bash completion, without the bash-completion package (its fallback).
complete_line() {  # WORDS... : prints the completions of the last word
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
    _walcut
    printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_file" "$@" | sort | tr '\n' ' '
}
expect_completion() {  # EXPECTED WORDS...
  local want=$1; shift
  local got
  got=$(complete_line "$@")
  [ "$got" = "$want" ] || bad "completing [$*]: expected [$want], got [$got]"
}
expect_completion "scan snapshot stats " walcut s
expect_completion "check cluster cut cuts " walcut c
expect_completion "--format --from-genesis --full " walcut check --f
expect_completion "json junit text " walcut check --format ""
expect_completion "json text " walcut dump --format ""
expect_completion "cut_abort cut_finish cut_start " walcut dump -t cut
expect_completion "check create " walcut snapshot c
expect_completion "--max-findings " walcut snapshot check --max
expect_completion "--svg " walcut cut show --s
expect_completion "cuts files restore " walcut check --level ""
expect_completion "json text " walcut stats --format =
expect_completion "json " walcut stats --format = j
expect_completion "always group off " walcut cluster up --sync ""
expect_completion "--node " walcut cluster kill --n
expect_completion "show start " walcut cut ""

# Both complete exactly the commands --help lists.
for parent in "" cluster cut snapshot; do
  # shellcheck disable=SC2086
  want=$(subcommands $parent | sort | tr '\n' ' ')
  # shellcheck disable=SC2086
  expect_completion "$want" walcut $parent ""
  for c in $want; do
    grep -qE "^ +$c\\\\:\"" "$zsh_file" || bad "$zsh_file: the command ${parent:+$parent }$c is not offered (a line '$c\\:\"...\"')"
  done
done

# restore and check take a directory or one command of theirs.
(
  cd "$(mktemp -d)"
  trap 'rmdir "$PWD"' EXIT
  expect_completion "assemble " walcut restore a
  expect_completion "merge " walcut check m
  expect_completion "--check --clean-stale --format --help --quiet -h -q " walcut restore assemble -
  expect_completion "--format --help --metrics --output --quiet -h -o -q " walcut check merge -
  expect_completion "json junit text " walcut check merge --format ""
  [ $fail = 0 ]
) || fail=1
grep -qE '^ +assemble\\:"' "$zsh_file" || bad "$zsh_file: the command restore assemble is not offered"
grep -qE '^ +merge\\:"' "$zsh_file" || bad "$zsh_file: the command check merge is not offered"

# zsh parses its completion (when zsh is installed: scripts/deps.sh installs it).
if command -v zsh >/dev/null; then
  zsh -n "$zsh_file" || bad "zsh -n $zsh_file"
else
  echo "note: zsh not installed, $zsh_file not parsed" >&2
fi

[ $fail = 0 ] && echo "ok: ${#paths[@]} commands; completions and manual pages agree with --help"
exit $fail
