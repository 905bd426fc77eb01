#!/usr/bin/env bash
# Per-interval accuracy on a real kernel path (issue 27's "held-out pairs from another tool"):
# network namespaces A -> M -> B, M forwarding through a `tbf` bottleneck (real FIFO queueing
# and tail drops, no reordering), UDP from A to B sent by python3, tcpdump capturing at A and
# at B with nanosecond timestamps. The captures are then scored interval by interval with
# `owl compare --json`: for each method, how many intervals have the true mean inside the
# method's 98 % bound and the true std inside its 95 % interval. The captures are kept.
#
#   sudo scripts/kernel-path.sh [SECONDS] [INTERVALS] [METHODS]
#        defaults: 30  "250ms 1s"  lda,rda,finecomb,lds,sample,probe,mpe
#   OWL=path/to/owl  OUT=dir  RATE_PPS=3500  TBF_RATE=3mbit  TBF_LATENCY=40ms  SWING=1
#   COMPARE_FLAGS="--cut-window 40ms"   (more flags for every `owl compare`)
#   OUT=dir SCORE_ONLY=1 scripts/kernel-path.sh ...  (score the captures already in dir again)
#
# With SWING=1 (the default) the offered load alternates every 0.7 s between 80 % and 130 % of
# RATE_PPS (by default the bottleneck's rate for 64-byte datagrams), so the queue fills and
# drains and each interval's delays spread; SWING=0 keeps it at RATE_PPS. Intervals one of
# whose cuts fell back to R's clock (a delay beyond --cut-window) are unpaired: counted, and
# left out of the scores. Needs root, iproute2, tc (sch_tbf), tcpdump, python3 and jq. A
# documented script, not a test: its numbers
# depend on the kernel's timing.
set -euo pipefail
secs="${1:-30}"
intervals="${2:-250ms 1s}"
methods="${3:-lda,rda,finecomb,lds,sample,probe,mpe}"
owl="${OWL:-target/release/owl}"
out="${OUT:-$(mktemp -d)}"
rate="${RATE_PPS:-3500}"
tbf_rate="${TBF_RATE:-3mbit}"
tbf_latency="${TBF_LATENCY:-40ms}"
read -r -a compare_flags <<< "${COMPARE_FLAGS:-}"
swing="${SWING:-1}"
[ -x "$owl" ] || { echo "build first: cargo build --release (or set OWL=)" >&2; exit 1; }
for t in ip tc tcpdump python3 jq; do
  command -v "$t" >/dev/null || { echo "$t is not installed" >&2; exit 1; }
done
mkdir -p "$out"
if [ -z "${SCORE_ONLY:-}" ]; then
[ "$(id -u)" = 0 ] || { echo "network namespaces need root" >&2; exit 1; }
id=$$
na="owlkp-a-$id" nm="owlkp-m-$id" nb="owlkp-b-$id"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in "$na" "$nm" "$nb"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in "$na" "$nm" "$nb"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip link add "kpa$id" type veth peer name "kpma$id"
ip link add "kpmb$id" type veth peer name "kpb$id"
while read -r ifc n addr; do
  ip link set "$ifc" netns "$n"
  ip -n "$n" addr add "$addr" dev "$ifc"
  ip -n "$n" link set "$ifc" up
done <<EOF
kpa$id $na 10.79.1.1/24
kpma$id $nm 10.79.1.2/24
kpmb$id $nm 10.79.2.1/24
kpb$id $nb 10.79.2.2/24
EOF
ip -n "$na" route add default via 10.79.1.2
ip -n "$nb" route add default via 10.79.2.1
ip netns exec "$nm" sysctl -q -w net.ipv4.ip_forward=1
ip netns exec "$nm" tc qdisc add dev "kpmb$id" root tbf rate "$tbf_rate" burst 16kb \
  latency "$tbf_latency"
filter="udp and dst port 9999"
for side in a b; do
  n="$na" ifc="kpa$id"
  [ "$side" = b ] && n="$nb" ifc="kpb$id"
  ip netns exec "$n" tcpdump -i "$ifc" -U -n --time-stamp-precision nano -w "$out/$side.pcap" \
    "$filter" 2>"$out/$side.tcpdump.log" &
  pids+=($!)
done
for _ in $(seq 50); do
  grep -q "listening on" "$out/a.tcpdump.log" "$out/b.tcpdump.log" 2>/dev/null &&
    [ "$(grep -l "listening on" "$out"/*.tcpdump.log | wc -l)" = 2 ] && break
  sleep 0.1
done
echo "sending ${secs}s of UDP at ~${rate} packets/s (swing=$swing) through tbf $tbf_rate" \
  "latency $tbf_latency; captures in $out" >&2
ip netns exec "$na" python3 - "$secs" "$rate" "$swing" <<'EOF'
import socket, sys, time
secs, rate, swing = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start = time.monotonic()
i = 0
sent_by = 0.0  # packets the schedule allows so far
last = start
while True:
    now = time.monotonic()
    if now - start >= secs:
        break
    # the offered rate: steady, or swinging between 0.8x and 1.3x of it every 0.7 s
    r = rate * ((0.8 if int((now - start) / 0.7) % 2 == 0 else 1.3) if swing else 1.0)
    sent_by += (now - last) * r
    last = now
    while i < sent_by:
        s.sendto(i.to_bytes(8, "big") + bytes(56), ("10.79.2.2", 9999))
        i += 1
    time.sleep(0.0005)
print(f"sent {i} datagrams", file=sys.stderr)
EOF
sleep 1
for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()
fi
for interval in $intervals; do
  "$owl" compare "$out/a.pcap" "$out/b.pcap" --methods "$methods" --interval "$interval" \
    ${compare_flags[@]+"${compare_flags[@]}"} --json >"$out/compare-$interval.json" 2>"$out/compare-$interval.err" || {
    cat "$out/compare-$interval.err" >&2
    exit 1
  }
  echo "== $interval intervals ($(jq '.intervals | length' "$out/compare-$interval.json") in all;" \
    "truth: $(jq -r '.truth | "\(.received) received, \(.lost) lost, mean \(.mean_ns / 1e6 | . * 1000 | round / 1000) ms, std \(.std_ns / 1e6 | . * 1000 | round / 1000) ms"' "$out/compare-$interval.json"))"
  # per method: intervals scored (paired, truth and estimate present), mean within 98 % bound,
  # std within 95 % interval, and median / max relative error of mean and std
  jq -r '
    def med: sort | if length == 0 then null else .[(length / 2 | floor)] end;
    def pct: if . == null then "-" else (. * 1000 | round / 10 | tostring) + " %" end;
    def fell: (.cut.start.cut.by // "") == "fallback" or (.cut.end.cut.by // "") == "fallback";
    "\(.intervals | map(select(fell)) | length) intervals unpaired (left out)",
    ([.intervals[] | select(.truth.mean_ns != null and .truth.matched > 1 and (fell | not)) as $i
      | .methods[] | {name, t: $i.truth, m: .}] | group_by(.name)[] |
    (map(select(.m.mean_ns != null))) as $e |
    (map(select(.m.mean_ci98_ns != null))) as $mb |
    (map(select(.m.std_ci95_ns != null))) as $sb |
    "\(.[0].name): \($e | length)/\(length) estimated; mean in 98 % bound \($mb | map(select(.m.mean_ci98_ns[0] <= .t.mean_ns and .t.mean_ns <= .m.mean_ci98_ns[1])) | length)/\($mb | length); std in 95 % interval \($sb | map(select(.m.std_ci95_ns[0] <= .t.std_ns and .t.std_ns <= .m.std_ci95_ns[1])) | length)/\($sb | length); mean error median \($e | map(.m.mean_rel_err | fabs) | med | pct), max \($e | map(.m.mean_rel_err | fabs) | max | pct); std error median \($e | map(select(.m.std_rel_err != null) | .m.std_rel_err | fabs) | med | pct), max \($e | map(select(.m.std_rel_err != null) | .m.std_rel_err | fabs) | max | pct)")
  ' "$out/compare-$interval.json"
  jq -r '.checks.cuts | "cuts: \(.)"' "$out/compare-$interval.json" | cut -c1-300
done
