#!/usr/bin/env bash
# Load test of the httpfilter middleware with wrk on 127.0.0.1: an empty
# handler, the same behind the middleware on the allowed path (all five
# rate-limit headers), and the 429 path. The three servers run side by side
# and the runs are interleaved (empty, allowed, denied, empty, ...) so that
# a change in machine load hits every mode alike. Prints every run, the
# median requests/s of each mode, and the ratios to the empty handler.
#
#   scripts/wrkbench.sh                      # defaults below
#   RUNS=3 DUR=10s THREADS=2 CONNS=50 LIMITER=local scripts/wrkbench.sh
#
# Modes: empty (the handler alone), headers (the handler setting the five
# headers as constants: the cost of the bytes alone), allowed, denied.
#
# LIMITER=node puts a started single-member node.Node behind the filter.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DUR=${DUR:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-50}
LIMITER=${LIMITER:-local}
read -r -a MODES <<<"${MODES:-empty headers allowed denied}"
URLPATH=/v1/organizations/acme/product/1

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/wrkbench" ./cmd/wrkbench

declare -A addr rates
for mode in "${MODES[@]}"; do
	mkfifo "$dir/$mode.fifo"
	"$dir/wrkbench" -mode "$mode" -limiter "$LIMITER" -addr 127.0.0.1:0 >"$dir/$mode.fifo" 2>"$dir/$mode.err" &
	pids+=($!)
	exec {fd}<"$dir/$mode.fifo"
	read -r a <&"$fd" # the server prints its address first (blocks until then)
	addr[$mode]=$a
	read -r check <&"$fd" # then the response to its own first request
	echo "$check"
done

for i in $(seq 1 "$RUNS"); do
	for mode in "${MODES[@]}"; do
		out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DUR" "http://${addr[$mode]}$URLPATH")
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
		lat=$(awk '/^    Latency/ {print $2, $3, $4}' <<<"$out")
		echo "run=$i mode=$mode req/s=$rps latency(avg stdev max)=[$lat] non2xx=${non2xx:-0}"
		rates[$mode]+="$rps "
	done
done

med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "wrk -t$THREADS -c$CONNS -d$DUR, limiter=$LIMITER, median of $RUNS interleaved runs (req/s):"
declare -A m
for mode in "${MODES[@]}"; do
	m[$mode]=$(med "${rates[$mode]}")
	echo "  $mode: ${m[$mode]}"
done
for mode in "${MODES[@]}"; do
	[[ $mode == empty || -z ${m[empty]:-} ]] && continue
	awk -v a="${m[$mode]}" -v e="${m[empty]}" -v n="$mode" 'BEGIN {printf "  %s/empty: %.3f\n", n, a/e}'
done
[[ -n ${m[headers]:-} && -n ${m[allowed]:-} ]] && awk -v a="${m[allowed]}" -v e="${m[headers]}" 'BEGIN {printf "  allowed/headers: %.3f\n", a/e}'
exit 0
