# bash completion for walcut(1). Installed as
# share/bash-completion/completions/walcut; or: source completions/walcut.bash
#
# One line per command below lists its options exactly as `walcut COMMAND
# --help` does (the test "cli: completions and manual pages cover every
# command and option" compares them); value completions follow the option
# names.

_walcut_commands="verify dump stats run cluster node load scan cuts cut diff export restore snapshot check history"
_walcut_record_types="tx_data tx_prepare tx_commit tx_rollback cut_start cut_finish cut_abort snapshot node_start"

_walcut_options() {
  case $1 in
    "") echo "-h --help -V --version" ;;
    verify) echo "-h --help --format -j --jobs -v --verbose -f --follow --follow-interval --progress --no-progress -q --quiet" ;;
    dump) echo "-h --help --format -t --type -x --tx -k --key -s --from -e --to --node -n --limit --max-bytes --mode -j --jobs --io-threads -f --follow --follow-interval -q --quiet" ;;
    stats) echo "-h --help --format -j --jobs --progress --no-progress -q --quiet" ;;
    run) echo "-h --help --nodes --backups --partitions --workload --txs --concurrency --cuts --cut-every --seed --segment-size --accounts --ring-keys --crash --epoch --full-snapshot-at --full-snapshot-every --wal-retention --crashes --format -q --quiet" ;;
    cluster) echo "-h --help" ;;
    "cluster up") echo "-h --help --nodes --backups --partitions --workload --accounts --ring-keys --sync --cut-every --full-snapshot-every --wal-retention --segment-size --base-port -q --quiet" ;;
    "cluster down") echo "-h --help -q --quiet" ;;
    "cluster kill") echo "-h --help --node -q --quiet" ;;
    "cluster restart") echo "-h --help --node -q --quiet" ;;
    "cluster status") echo "-h --help -q --quiet" ;;
    "cluster snapshot") echo "-h --help --name --timeout --format -q --quiet" ;;
    node) echo "-h --help --node -q --quiet" ;;
    load) echo "-h --help --clients --duration --workload --rate --history --seed --format -q --quiet" ;;
    scan) echo "-h --help -o --out --node --progress --no-progress -q --quiet" ;;
    cuts) echo "-h --help --format -j --jobs --verdict-out --cut --latest --base --cluster-json --progress --no-progress -q --quiet" ;;
    cut) echo "-h --help" ;;
    "cut show") echo "-h --help --format -j --jobs --svg --progress --no-progress -q --quiet" ;;
    "cut start") echo "-h --help --format -q --quiet" ;;
    diff) echo "-h --help --format -n --limit --max-bytes -q --quiet" ;;
    export) echo "-h --help --repo --from-cut --to-cut --format --net --by-transaction --keys --node -o --output -j --jobs --progress --no-progress -q --quiet" ;;
    restore) echo "-h --help --repo --s3-endpoint --s3-region --encrypt-key-file --cut --latest --before --base -o --out --dry-run --force -j --jobs --io-threads --check --clean-stale --keys --partition --verdict --summaries --node --cluster-json --format --progress --no-progress -q --quiet" ;;
    "restore assemble") echo "-h --help --check --clean-stale --format -q --quiet" ;;
    snapshot) echo "-h --help" ;;
    "snapshot check") echo "-h --help --s3-endpoint --s3-region --encrypt-key-file --restore -o --output --metrics -j --jobs --check --cluster --max-findings --format -q --quiet" ;;
    "snapshot show") echo "-h --help --node -k --keys --max-bytes --format -q --quiet" ;;
    "snapshot create") echo "-h --help --repo --s3-endpoint --s3-region --encrypt-key-file --break-lock --full --incremental --from --cut --latest --parent --name --zstd-level -j --jobs --verdict --node --assemble --format -q --quiet" ;;
    "snapshot list") echo "-h --help --s3-endpoint --s3-region --encrypt-key-file --format -q --quiet" ;;
    "snapshot expire") echo "-h --help --s3-endpoint --s3-region --encrypt-key-file --break-lock --keep-full --dry-run --format -q --quiet" ;;
    check) echo "-h --help --cut --all --level --format -o --output --metrics --state --full --from-genesis -j --jobs --node --verdict --base --progress --no-progress -q --quiet" ;;
    "check merge") echo "-h --help --format -o --output --metrics -q --quiet" ;;
    history) echo "-h --help" ;;
    "history check") echo "-h --help --clock-slack --format -q --quiet" ;;
  esac
}

# Options that take a value: what to offer for it ("" = nothing to offer).
_walcut_values() {  # COMMAND OPTION
  case $2 in
    --format)
      case $1 in
        check|"check merge"|"snapshot check") echo "words:text json junit" ;;
        export) echo "words:jsonl csv" ;;
        *) echo "words:text json" ;;
      esac ;;
    --level) echo "words:files cuts restore" ;;
    --check) echo "words:bank cycle auto" ;;
    --mode) echo "words:strict tolerate-torn-tail point-in-time salvage" ;;
    --workload) echo "words:bank cycle mixed" ;;
    --wal-retention) echo "words:keep after-snapshot" ;;
    --sync) echo "words:always group off" ;;
    -t|--type) echo "words:$_walcut_record_types" ;;
    -o|--out|--output|--metrics|--svg|--state|--verdict-out|--verdict|--summaries|--cluster-json|--history|--encrypt-key-file) echo "files" ;;
    --repo|--cluster) echo "dirs" ;;
    --base)
      case $1 in
        restore|check) echo "dirs" ;;
        *) echo "none" ;;
      esac ;;
    --keys)  # restore --keys PREFIX; snapshot show --keys is a flag
      case $1 in
        restore|export) echo "none" ;;
      esac ;;
    -j|--jobs|-x|--tx|-k|--key|-s|--from|-e|--to|--node|-n|--limit|--max-bytes|--nodes|--backups|\
    --partitions|--txs|--concurrency|--cuts|--cut-every|--seed|--segment-size|--accounts|--ring-keys|\
    --crash|--epoch|--full-snapshot-at|--full-snapshot-every|--crashes|--cut|--before|--max-findings|--parent|\
    --name|--zstd-level|--keep-full|--s3-endpoint|--s3-region|--clients|--duration|--rate|--base-port|--clock-slack|\
    --partition|--from-cut|--to-cut) echo "none" ;;
  esac
}

_walcut() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -s || return   # -s: --opt=value gives prev --opt, cur value
  else
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    # bash splits --opt=value into --opt, =, value
    if [[ $cur == = ]]; then
      cur=""
    elif [[ $prev == = && $cword -ge 2 ]]; then
      prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi
  fi

  # The command named so far: the first word that is a command, then, after
  # cluster, cut, snapshot, restore or check, the first word that is one of theirs
  # (restore and check take a directory there too).
  local cmd="" i w
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    [[ $w == -* ]] && continue
    case $cmd in
      "") [[ " $_walcut_commands " == *" $w "* ]] && cmd=$w ;;
      cut) [[ " show start " == *" $w "* ]] && cmd="cut $w" ;;
      cluster) [[ " up down kill restart status snapshot " == *" $w "* ]] && cmd="cluster $w" ;;
      snapshot) [[ " check show create list expire " == *" $w "* ]] && cmd="snapshot $w" ;;
      restore) [[ $w == assemble ]] && cmd="restore assemble" ;;
      check) [[ $w == merge ]] && cmd="check merge" ;;
      history) [[ $w == check ]] && cmd="history check" ;;
    esac
  done

  if [[ $prev == -* ]]; then
    local v
    v=$(_walcut_values "$cmd" "$prev")
    case $v in
      words:*) COMPREPLY=($(compgen -W "${v#words:}" -- "$cur")); return ;;
      files) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
      dirs) COMPREPLY=($(compgen -d -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
      none) return ;;
    esac
  fi

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_walcut_options "$cmd")" -- "$cur"))
    return
  fi
  case $cmd in
    "") COMPREPLY=($(compgen -W "$_walcut_commands" -- "$cur")) ;;
    cut) COMPREPLY=($(compgen -W "show start" -- "$cur")) ;;
    cluster) COMPREPLY=($(compgen -W "up down kill restart status snapshot" -- "$cur")) ;;
    history) COMPREPLY=($(compgen -W "check" -- "$cur")) ;;
    snapshot) COMPREPLY=($(compgen -W "check show create list expire" -- "$cur")) ;;
    restore|check)
      local sub=assemble
      [[ $cmd == check ]] && sub=merge
      COMPREPLY=($(compgen -W "$sub" -- "$cur") $(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null ;;
    *) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null ;;
  esac
}
complete -F _walcut walcut
