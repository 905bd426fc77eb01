#!/usr/bin/env bash
# OPA's pair-side CPU per second of traffic (issue 29, item 2): what `opa:cpu` bounds.
#
# Simulates the pairs below (once, into DIR, kept between runs), records each point's
# `opa` and `opa-wavelet` synopses with `owl record` (recording is not measured), then runs
# `owl --threads 1 estimate S.owl R.owl` — decoding both synopses, the whole recovery and the
# estimate: OPA's pair side — RUNS times per binary, the binaries alternated, and prints the
# median CPU time (user + sys) over the pair's seconds of traffic, beside the budget's
# `search work` note, the packets placed and the estimate's mean delay. A documented script,
# not a timed test; on a shared machine take its medians, not one run.
#
#   scripts/opa-budget.sh DIR RUNS CPUS OWL [OWL ...]
#   scripts/opa-budget.sh /tmp/opa-pairs 3 "1 0.1" /tmp/owl-before target/release/owl
#   PAIRS="fifo reordered" METHODS=opa scripts/opa-budget.sh ...   (a subset of the pairs, methods)
#   cpu=1000 searches every group to its cap: the same work for two binaries, so the speed of
#   recovery (opa-wavelet's Algorithm 1 takes about a minute a second of 1 Mpps traffic there)
#
# The pairs (`owl simulate`; traffic seconds = packets / rate):
#   demo       owl demo's pair: 200 k packets at 100 kpps (2 s), 1 % loss, 0.1 % reordering
#   fifo       1 M packets at 1 Mpps (1 s), FIFO queue, 10⁻³ loss, the default 0.1 % reordering
#   lossy      the same at 10⁻² loss (beyond nothing: opa's design loss is 1 %)
#   reordered  1 M packets at 1 Mpps with independent per-packet delays (no queue: most packets
#              reordered), cut in 250 ms intervals
#   reordered1 300 k packets at 500 kpps (0.6 s) with independent delays, one interval
set -euo pipefail
dir="${1:?DIR}"
runs="${2:-3}"
cpus="${3:-1}"
shift 3
[ $# -ge 1 ] || { echo "usage: $0 DIR RUNS CPUS OWL [OWL ...]" >&2; exit 1; }
owls=("$@")
pairs=(${PAIRS:-demo fifo lossy reordered reordered1})
mkdir -p "$dir"
sim="${owls[-1]}"
spec() {
  case "$1" in
    demo) echo "200000 100000 0 --delay weibull-mean:10us:0.7 --loss uniform:0.01 --reorder 0.001:8 --duplicate 0.0005 --seed 1" ;;
    fifo) echo "1000000 1000000 250ms --loss uniform:0.001 --seed 7" ;;
    lossy) echo "1000000 1000000 250ms --loss uniform:0.01 --seed 3" ;;
    reordered) echo "1000000 1000000 250ms --independent-delays --seed 5" ;;
    reordered1) echo "300000 500000 0 --independent-delays --seed 6" ;;
  esac
}
for p in "${pairs[@]}"; do
  read -r n rate interval rest <<<"$(spec "$p")"
  if [ ! -f "$dir/$p/receiver.pcap" ]; then
    # shellcheck disable=SC2086
    "$sim" simulate --out "$dir/$p" --packets "$n" --rate "$rate" $rest >/dev/null 2>&1
  fi
done
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-11s %-12s %5s %-24s %9s %9s %9s  %s\n' pair method cpu binary cpu_s per_s placed search
for p in "${pairs[@]}"; do
  read -r n rate interval rest <<<"$(spec "$p")"
  secs=$(echo "$n / $rate" | bc -l)
  for m in ${METHODS:-opa opa-wavelet}; do
    for c in $cpus; do
      for ((b = 0; b < ${#owls[@]}; b++)); do
        o="${owls[$b]}"
        syn="$dir/$p/syn-$b-$m-$c"
        mkdir -p "$syn"
        for role in sender receiver; do
          [ -f "$syn/$role.owl" ] || "$o" record --method "$m" --role "$role" \
            --interval "$interval" --method-config "$m:cpu=$c" \
            "$dir/$p/$role.pcap" -o "$syn/$role.owl" >/dev/null 2>&1
        done
        rm -f "$syn/time"
      done
      for ((i = 0; i < runs; i++)); do
        for ((b = 0; b < ${#owls[@]}; b++)); do
          syn="$dir/$p/syn-$b-$m-$c"
          /usr/bin/time -a -o "$syn/time" -f "%U %S" "${owls[$b]}" --threads 1 estimate \
            "$syn/sender.owl" "$syn/receiver.owl" --json >"$syn/est.json" 2>/dev/null
        done
      done
      for ((b = 0; b < ${#owls[@]}; b++)); do
        syn="$dir/$p/syn-$b-$m-$c"
        cpu=$(awk '{print $1 + $2}' "$syn/time" | median)
        read -r placed search <<<"$(python3 - "$syn/est.json" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
est = d["overall"] if "overall" in d else d
def walk(x):
    if isinstance(x, dict):
        yield x
        for v in x.values():
            yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
placed = recv = 0
work = []
steps = 0.0
for e in walk(d):
    for n in e.get("notes", []) if isinstance(e.get("notes"), list) else []:
        m = re.match(r"(\d+) of (\d+) received packets placed", n)
        if m and e is not est:
            placed += int(m.group(1)); recv += int(m.group(2))
        m = re.search(r"work ([0-9.]+) % of the interval's budget \((\d+) ms", n)
        if m and e is not est:
            work.append(float(m.group(1)))
            steps += float(m.group(1)) / 100 * float(m.group(2)) / 1e3
print("%.3f%%" % (100.0 * placed / max(recv, 1)), ("max_%.0f%%_of_budget,_%.2f_s_of_steps" % (max(work), steps)) if work else "-")
EOF
)"
        printf '%-11s %-12s %5s %-24s %9.2f %9.2f %9s  %s\n' "$p" "$m" "$c" \
          "$(basename "$(dirname "${owls[$b]}")")/$(basename "${owls[$b]}")" "$cpu" \
          "$(echo "$cpu / $secs" | bc -l)" "$placed" "$search"
      done
    done
  done
done
