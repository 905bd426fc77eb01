#!/usr/bin/env bash
# `owl compare` against `tcpdump -nr` on the same pair (issue 29): a simulated pair
# (`owl simulate --packets N --rate 1M`, default 1 M packets), then, alternated RUNS times
# (default 3), tcpdump printing the sender's file to /dev/null, `owl compare` with every
# method on every core, the same on one thread (--threads 1), and `--methods exact`. It prints
# each command's median wall time, its ratio to tcpdump's, CPU time and peak RSS, and the
# per-method times of the last default run (the report's `time_s`: a method's own work,
# summed over the threads it ran on). A documented script, not a timed test: run it on a
# quiet machine.
#
#   scripts/compare-vs-tcpdump.sh [PACKETS] [RUNS]
#   OWL=path/to/owl scripts/compare-vs-tcpdump.sh      (default: target/release/owl)
set -euo pipefail
n="${1:-1000000}"
runs="${2:-3}"
owl="${OWL:-target/release/owl}"
[ -x "$owl" ] || { echo "build first: cargo build --release (or set OWL=)" >&2; exit 1; }
command -v tcpdump >/dev/null || { echo "tcpdump is needed (apt-get install tcpdump)" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$owl" simulate --out "$dir/p" --packets "$n" --rate 1M >/dev/null 2>&1
s="$dir/p/sender.pcap"
r="$dir/p/receiver.pcap"
names=(tcpdump default threads1 exact)
cmd() {
  case "$1" in
    tcpdump) tcpdump -nr "$s" ;;
    default) "$owl" compare "$s" "$r" --json ;;
    threads1) "$owl" compare "$s" "$r" --json --threads 1 ;;
    exact) "$owl" compare "$s" "$r" --json --methods exact ;;
  esac
}
for ((i = 0; i < runs; i++)); do
  for name in "${names[@]}"; do
    out=/dev/null
    [ "$name" = default ] && out="$dir/last.json"
    /usr/bin/time -a -o "$dir/$name.time" -f "%e %U %S %M" bash -c "$(declare -f cmd); s='$s' r='$r' owl='$owl' cmd $name" >"$out" 2>/dev/null
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
td=$(awk '{print $1}' "$dir/tcpdump.time" | median)
printf '%-10s %8s %8s %8s %10s\n' command wall_s x_tcpdump cpu_s peak_MB
for name in "${names[@]}"; do
  wall=$(awk '{print $1}' "$dir/$name.time" | median)
  cpu=$(awk '{print $2 + $3}' "$dir/$name.time" | median)
  peak=$(awk '{print $4}' "$dir/$name.time" | sort -n | tail -1)
  printf '%-10s %8.2f %8.2f %8.2f %10.0f\n' "$name" "$wall" "$(echo "$wall / $td" | bc -l)" "$cpu" "$((peak / 1024))"
done
echo "per-method time_s of the last default run:"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ms = sorted(d["methods"], key=lambda m: -m["time_s"])
print("  " + ", ".join("%s %.2f" % (m["name"], m["time_s"]) for m in ms))
' "$dir/last.json"
