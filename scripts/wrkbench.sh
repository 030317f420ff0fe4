#!/usr/bin/env bash
# Load test of the httpfilter middleware with wrk on 127.0.0.1: an empty
# handler, the same with the five headers written as constants, the same
# behind the middleware on the allowed path (all five rate-limit headers),
# and the 429 path.
#
# The servers run side by side and every round runs each mode once, in
# forward order on odd rounds and in reverse order on even ones (ABBA), so
# that a drift in machine load hits every mode alike. Each round's ratios to
# the empty handler are paired: they compare runs made seconds apart. On a
# shared 2-core machine single runs swing by ±20%, which is why the summary
# gives the median of the paired ratios with their spread, next to the
# ratio of the median rates.
#
# Besides req/s, the script reads each server's CPU time from /proc before
# and after every run and reports server CPU per request, a figure that
# moves much less with the machine's load than throughput does.
#
#   scripts/wrkbench.sh                      # defaults below
#   RUNS=12 DUR=3s THREADS=2 CONNS=50 LIMITER=local scripts/wrkbench.sh
#   MODES="empty allowed" RUNS=20 scripts/wrkbench.sh
#
# Modes: empty (the handler alone), headers (the handler setting the five
# headers as constants: the cost of the bytes alone), allowed, denied.
#
# LIMITER=node puts a started single-member node.Node behind the filter.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-12}
DUR=${DUR:-3s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-50}
LIMITER=${LIMITER:-local}
read -r -a MODES <<<"${MODES:-empty headers allowed denied}"
URLPATH=/v1/organizations/acme/product/1
TCK=$(getconf CLK_TCK)

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
go build -o "$dir/wrkbench" ./cmd/wrkbench

declare -A addr pid
for mode in "${MODES[@]}"; do
	mkfifo "$dir/$mode.fifo"
	"$dir/wrkbench" -mode "$mode" -limiter "$LIMITER" -addr 127.0.0.1:0 >"$dir/$mode.fifo" 2>"$dir/$mode.err" &
	pids+=($!)
	pid[$mode]=$!
	exec {fd}<"$dir/$mode.fifo"
	read -r a <&"$fd" # the server prints its address first (blocks until then)
	addr[$mode]=$a
	read -r check <&"$fd" # then the response to its own first request
	echo "$check"
done

cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# rate[mode,round] and cpu[mode,round] (µs of server CPU per request)
declare -A rate cpu
for i in $(seq 1 "$RUNS"); do
	order=("${MODES[@]}")
	if ((i % 2 == 0)); then
		order=()
		for ((k = ${#MODES[@]} - 1; k >= 0; k--)); do order+=("${MODES[k]}"); done
	fi
	for mode in "${order[@]}"; do
		c0=$(cputicks "${pid[$mode]}")
		out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DUR" "http://${addr[$mode]}$URLPATH")
		c1=$(cputicks "${pid[$mode]}")
		rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		n=$(awk '/ requests in / {print $1}' <<<"$out")
		non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
		us=$(awk -v c=$((c1 - c0)) -v n="$n" -v t="$TCK" 'BEGIN {printf "%.2f", c / t / n * 1e6}')
		rate[$mode,$i]=$rps
		cpu[$mode,$i]=$us
		echo "run=$i mode=$mode req/s=$rps server-cpu/req=${us}us non2xx=${non2xx:-0}"
	done
done

# med prints the median of its arguments; spread prints "min–max".
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f–%.3f", lo, hi}'; }

echo
echo "wrk -t$THREADS -c$CONNS -d$DUR, limiter=$LIMITER, $RUNS rounds (ABBA order):"
printf '  %-8s %12s %18s\n' mode "median req/s" "median server CPU"
declare -A m
for mode in "${MODES[@]}"; do
	rs=() cs=()
	for i in $(seq 1 "$RUNS"); do rs+=("${rate[$mode,$i]}"); cs+=("${cpu[$mode,$i]}"); done
	m[$mode]=$(med "${rs[@]}")
	printf '  %-8s %12.0f %15.2f µs/req\n' "$mode" "${m[$mode]}" "$(med "${cs[@]}")"
done
[[ -z ${m[empty]:-} ]] && exit 0
echo "ratios to empty: paired median (spread over rounds) | ratio of median rates"
for mode in "${MODES[@]}"; do
	[[ $mode == empty ]] && continue
	ps=()
	for i in $(seq 1 "$RUNS"); do ps+=("$(awk -v a="${rate[$mode,$i]}" -v e="${rate[empty,$i]}" 'BEGIN {printf "%.4f", a / e}')"); done
	printf '  %s/empty: %.3f (%s) | %.3f\n' "$mode" "$(med "${ps[@]}")" "$(spread "${ps[@]}")" \
		"$(awk -v a="${m[$mode]}" -v e="${m[empty]}" 'BEGIN {print a / e}')"
done
exit 0
