#!/usr/bin/env bash
# Load benchmark of the live agents (issue 14, item 8): an agent pair on loopback replays a
# simulated capture pair at full speed (--replay --speed max), each agent pinned to its own
# core, and the script reports packets per second per agent with each agent's CPU time and
# peak memory. A documented script, not a timed test: run it on a quiet machine.
#
#   scripts/agent-load.sh [PACKETS] [METHODS] [INTERVAL]     (defaults: 2000000 rda,lda,lds 1s)
#   OWL=path/to/owl scripts/agent-load.sh                      (default: target/release/owl)
#   RECEIVER_FLAGS=--per-class scripts/agent-load.sh 2000000 sample,opa   (flags for R only)
#
# The traffic is `owl simulate` at 1 M packets/s (so 1 s intervals hold 1 M packets), 1 %
# loss. With --speed max a replay waits for the exchange, so nothing is dropped and the rate is
# what the pair sustains; with --speed 1 (real time, like a live interface) an agent that falls
# behind drops whole intervals and says so in its log and in R's lines (status missing).
set -euo pipefail
n="${1:-2000000}"
methods="${2:-rda,lda,lds}"
interval="${3:-1s}"
owl="${OWL:-target/release/owl}"
read -r -a receiver_flags <<< "${RECEIVER_FLAGS:-}"
[ -x "$owl" ] || { echo "build first: cargo build --release (or set OWL=)" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$owl" simulate --out "$dir/p" --packets "$n" --rate 1M --loss uniform:0.01 >/dev/null 2>&1
"$owl" keygen -o "$dir/k" 2>/dev/null
port=$((20000 + RANDOM % 20000))
pin() { if command -v taskset >/dev/null 2>&1; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
fmt="%e %U %S %M"
start=$(date +%s.%N)
pin 0 /usr/bin/time -o "$dir/r.time" -f "$fmt" "$owl" agent --role receiver \
  --listen "127.0.0.1:$port" --replay "$dir/p/receiver.pcap" --speed max --interval "$interval" \
  --methods "$methods" --key-file "$dir/k" ${receiver_flags[@]+"${receiver_flags[@]}"} \
  >"$dir/r.jsonl" 2>"$dir/r.err" &
rx=$!
pin 1 /usr/bin/time -o "$dir/s.time" -f "$fmt" "$owl" agent --role sender \
  --peer "127.0.0.1:$port" --replay "$dir/p/sender.pcap" --speed max --interval "$interval" \
  --methods "$methods" --key-file "$dir/k" 2>"$dir/s.err"
wait "$rx"
end=$(date +%s.%N)
lines=$(grep -c '"type":"interval"' "$dir/r.jsonl" || true)
missing=$(grep -c '"status":"missing"' "$dir/r.jsonl" || true)
count() { grep -o "\"$1\":[0-9]*" "$dir/r.jsonl" | awk -F: '{ s += $2 } END { print s + 0 }'; }
echo "$n packets simulated; R's lines: $lines intervals ($missing missing), $(count sent) sent and $(count received) received packets; methods $methods, $interval intervals"
for who in receiver sender; do
  read -r wall user sys rss <"$dir/${who:0:1}.time"
  awk -v who="$who" -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss" 'BEGIN {
    printf "%-8s %6.2f s wall, %6.2f s CPU: %5.2f M packets/s of wall, %5.2f M/s of CPU, peak RSS %.0f MiB\n",
      who, w, u + s, n / w / 1e6, n / (u + s) / 1e6, m / 1024 }'
done
awk -v a="$start" -v b="$end" 'BEGIN { printf "pair: %.2f s end to end\n", b - a }'
