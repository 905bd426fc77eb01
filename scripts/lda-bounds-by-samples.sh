#!/usr/bin/env bash
# How often LDA's per-interval bounds hold, by the interval's effective samples: the
# measurement behind LDA's MIN_BOUND_SAMPLES (crates/owl-core/src/methods/lda/method.rs).
# The default LDA is tuned for 5 M packets an interval; at 4 k packets/s its intervals of
# 250 ms to 5 s hold 3 to 100+ effective samples. For each seed and delay model, `owl
# simulate` (FIFO path, 0.5 % loss) then `owl compare --methods lda` at each interval length;
# every interval is scored against its own truth: the mean inside the 98 % bound, the std
# inside the 95 % interval. A current build withholds both bounds below MIN_BOUND_SAMPLES
# (column "withheld"); to see how they fared there, point OWL at a build of a commit from
# before the rule (git worktree add /tmp/old 1cfa718 && cargo build --release in it).
#
#   scripts/lda-bounds-by-samples.sh [SEEDS]      (default 40; ~15 s on 2 cores)
#   OWL=path/to/owl scripts/lda-bounds-by-samples.sh
set -euo pipefail
seeds="${1:-40}"
owl="${OWL:-target/release/owl}"
[ -x "$owl" ] || { echo "build first: cargo build --release (or set OWL=)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq is not installed" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
one() {
  local seed=$1 delay=$2 tag=$3 d="$dir/sim-$3-$1"
  "$owl" simulate --out "$d" --seed "$seed" --packets 40k --rate 4k --delay "$delay" \
    --loss uniform:0.005 >/dev/null 2>&1
  for iv in 250ms 500ms 1s 2s 5s; do
    "$owl" compare "$d/sender.pcap" "$d/receiver.pcap" --methods lda --interval "$iv" \
      --json --seed "$seed" 2>/dev/null |
      jq -r --arg tag "$tag" '.intervals[] | select(.truth.matched > 1) | .truth as $t
        | .methods[] | select(.name == "lda" and .mean_ns != null)
        | "\($tag) \(.samples) \(if .mean_ci98_ns == null then "w" elif .mean_ci98_ns[0] <= $t.mean_ns and $t.mean_ns <= .mean_ci98_ns[1] then 1 else 0 end) \(if .std_ci95_ns == null then "w" elif .std_ci95_ns[0] <= $t.std_ns and $t.std_ns <= .std_ci95_ns[1] then 1 else 0 end)"'
  done
  rm -rf "$d"
}
export -f one
export owl dir
for s in $(seq 1 "$seeds"); do
  for m in "weibull-mean:200us:0.7 weibull-0.7" "weibull-mean:2ms:0.6 weibull-0.6-queue" \
    "pareto-mean:500us:2.5 pareto-2.5"; do
    echo "$s $m"
  done
done | xargs -P "$(nproc)" -L 1 bash -c 'one "$0" "$1" "$2"' >"$dir/all.txt"
echo "delays             samples   intervals  mean in 98 % bound  std in 95 % interval  withheld"
awk '{
  n = $2
  b = (n < 5) ? "1: <5" : (n < 10) ? "2: 5-9" : (n < 20) ? "3: 10-19" : (n < 30) ? "4: 20-29" : (n < 50) ? "5: 30-49" : (n < 100) ? "6: 50-99" : "7: 100+"
  k = $1 "|" b; c[k]++
  if ($3 == "w") w[k]++; else { mb[k]++; m[k] += $3 }
  if ($4 != "w") { sb[k]++; s[k] += $4 }
}
END {
  for (k in c) {
    split(k, p, "|")
    printf "%-18s %-11s %9d  %18s  %20s  %8d\n", p[1], p[2], c[k],
      (mb[k] ? sprintf("%.1f %% of %d", 100 * m[k] / mb[k], mb[k]) : "-"),
      (sb[k] ? sprintf("%.1f %% of %d", 100 * s[k] / sb[k], sb[k]) : "-"), w[k]
  }
}' "$dir/all.txt" | sort | sed -E 's/ [0-9]: / /'
