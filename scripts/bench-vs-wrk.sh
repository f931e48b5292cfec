#!/usr/bin/env bash
# The flash-sale figures of docs/benchmarks-log.md ("Flash-sale refusals
# and takes over HTTP, with wrk"; the summary in BENCHMARKS.md), measured
# side by side in one invocation against a voucherd of its own (`voucherd
# dev` in a temporary folder: PostgreSQL, Redis, flash writes sync, log
# level warn, on 127.0.0.1 only).
#
#   scripts/bench-vs-wrk.sh [rounds=3] [seconds=6] [connections=64]
#
# Each round, in this order, each load run `wrk -t1 -cN -dS --latency`:
#   1. a flash voucher of 1,000 uses is created and sold out (wrk, 2 s);
#   2. the sold-out refusal: reservations of that voucher, each a new
#      customerId and orderId (docs/bench/wrk-reserve.lua), answered 409
#      HELD_OUT from the sold-out cache;
#   3. GET /healthz (the no-op);
#   4. `voucherd bench --noop` on GET /healthz (the bench's own generator);
#   5. takes: reservations of a flash voucher of 10^9 uses (every one 201).
# After each round the sold-out voucher must hold exactly 1,000 uses (more
# stops the script as an oversell; fewer, still after 15 s, is reported).
# Printed: each run's req/s, p99, the server's CPU time per request (from
# /proc, user+system, the voucherd process only) and the load generator's
# (wrk's or the bench's), then the medians and the targets in one
# table. Ratios are taken per round between neighbouring runs.
#
# Environment: VOUCHERD (binary; default built from this checkout), PORT_BASE
# (default 18600: API on it, pprof +1, PostgreSQL +2, Redis +3),
# PROFILE_DIR (when set: a 4 s CPU profile of the server during round 1's
# healthz, refusal and takes runs is saved there; those runs are then slower).
set -euo pipefail
rounds=${1:-3}
secs=${2:-6}
conns=${3:-64}
command -v wrk >/dev/null || { echo "wrk not found (Debian/Ubuntu: apt-get install wrk)" >&2; exit 1; }
for c in curl jq bc; do command -v $c >/dev/null || { echo "$c not found" >&2; exit 1; }; done
root=$(cd "$(dirname "$0")/.." && pwd)
lua=$root/docs/bench/wrk-reserve.lua
tmp=$(mktemp -d)
chmod 755 "$tmp" # the PostgreSQL child may run as another user
bin=${VOUCHERD:-}
if [[ -z $bin ]]; then
	bin=$tmp/voucherd
	(cd "$root" && go build -o "$bin" ./cmd/voucherd)
fi
base=${PORT_BASE:-18600}
api=127.0.0.1:$base
url=http://$api
"$bin" dev --dir "$tmp/dev" --reset --addr "$api" --pprof-addr "127.0.0.1:$((base + 1))" \
	--pg-port $((base + 2)) --redis-port $((base + 3)) --log-level warn >"$tmp/dev.log" 2>&1 &
dev=$!
cleanup() {
	kill "$dev" 2>/dev/null && wait "$dev" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
for ((i = 0; i < 180; i++)); do
	curl -fs "$url/readyz" >/dev/null 2>&1 && break
	kill -0 "$dev" 2>/dev/null || { cat "$tmp/dev.log" >&2; exit 1; }
	sleep 0.5
done
curl -fs "$url/readyz" >/dev/null || { echo "voucherd dev not ready after 90 s" >&2; tail "$tmp/dev.log" >&2; exit 1; }
# The serving process: dev itself (PostgreSQL and Redis are its children,
# whose CPU /proc/PID/stat does not count until they exit).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$dev/stat"; }
tck=$(getconf CLK_TCK)

voucher() { # code totalLimit
	local from to
	from=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
	to=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	curl -fs -o /dev/null -X POST "$url/vouchers" -H 'Content-Type: application/json' \
		-d "{\"code\":\"$1\",\"discountAmount\":100,\"totalLimit\":$2,\"perUserLimit\":1,\"startsAt\":\"$from\",\"endsAt\":\"$to\",\"flashSale\":true}"
	curl -fs -o /dev/null -X POST "$url/vouchers/$1/warmup"
}

# run NAME PATH [lua]: one wrk run; prints "req/s p99_ms server_cpu_us
# non2xx generator_cpu_us" (CPU per request).
run() {
	local name=$1 path=$2 script=${3:-} out c0 c1 prof=
	if [[ -n ${PROFILE_DIR:-} && $round == 1 ]]; then
		mkdir -p "$PROFILE_DIR"
		(sleep 1; curl -fs -o "$PROFILE_DIR/$name.prof" "http://127.0.0.1:$((base + 1))/debug/pprof/profile?seconds=4") &
		prof=$!
	fi
	c0=$(cpu_ticks)
	if [[ -n $script ]]; then
		out=$(VOUCHER_PATH=$path /usr/bin/time -f 'GENCPU %U %S' wrk -t1 -c"$conns" -d"${secs}s" --latency -s "$script" "$url" 2>&1)
	else
		out=$(/usr/bin/time -f 'GENCPU %U %S' wrk -t1 -c"$conns" -d"${secs}s" --latency "$url$path" 2>&1)
	fi
	c1=$(cpu_ticks)
	[[ -n $prof ]] && wait "$prof"
	awk -v c=$((c1 - c0)) -v tck="$tck" '
		/Requests\/sec/ {rate = $2}
		/^ +99%/ {v = $2; if (v ~ /us$/) p = v / 1000; else if (v ~ /ms$/) p = v + 0; else if (v ~ /s$/) p = v * 1000}
		/requests in/ {n = $1}
		/Non-2xx/ {bad = $NF}
		/^GENCPU/ {g = $2 + $3}
		END {printf "%.0f %.1f %.1f %d %.1f\n", rate, p, c / tck * 1e6 / n, bad, g * 1e6 / n}' <<<"$out"
}

declare -a H R T B HC RC TC RP RATIO BRATIO WG BG CR
printf '%-6s %-10s %10s %9s %12s %12s %s\n' round run req/s p99_ms server_us/req gen_us/req note
for ((round = 1; round <= rounds; round++)); do
	s=S$round-$$ t=T$round-$$
	voucher "$s" 1000
	voucher "$t" 1000000000
	for ((i = 0; i < 10; i++)); do # sell out: 2 s runs until no use is left
		VOUCHER_PATH=/vouchers/$s/reservations wrk -t1 -c"$conns" -d2s -s "$lua" "$url" >/dev/null
		[[ $(curl -fs "$url/vouchers/$s" | jq '.remaining') == 0 ]] && break
	done
	read -r rr rp rc _ _ < <(run refusal "/vouchers/$s/reservations" "$lua")
	read -r hr hp hc _ hg < <(run healthz /healthz)
	c0=$(cpu_ticks)
	bout=$(/usr/bin/time -f 'GENCPU %U %S' "$bin" bench --url "$url" --noop --concurrency "$conns" --duration "${secs}s" \
		--requests 0 --quiet --json 2>"$tmp/bench.err") || { cat "$tmp/bench.err" >&2; exit 1; }
	c1=$(cpu_ticks)
	br=$(jq -r '.rate // .[0].rate' <<<"$bout")
	bn=$(jq -r '.answered // .requests // .[0].answered // empty' <<<"$bout")
	bg=$(awk -v n="${bn:-0}" '/^GENCPU/ {if (n > 0) printf "%.1f", ($2 + $3) * 1e6 / n; else print "-"}' "$tmp/bench.err")
	bc_=$(awk -v c=$((c1 - c0)) -v tck="$tck" -v n="${bn:-0}" 'BEGIN {if (n > 0) printf "%.1f", c / tck * 1e6 / n; else print "-"}')
	read -r tr tp tc tbad _ < <(run takes "/vouchers/$t/reservations" "$lua")
	for ((i = 0; i < 30; i++)); do # writes in flight or unsettled settle within seconds
		used=$(curl -fs "$url/vouchers/$s" | jq '.reserved + .confirmed')
		[[ $used == 1000 ]] && break
		sleep 0.5
	done
	printf '%-6s %-10s %10s %9s %12s %12s %s\n' "$round" refusal "$rr" "$rp" "$rc" - "uses held: $used of 1000"
	printf '%-6s %-10s %10s %9s %12s %12s\n' "$round" healthz "$hr" "$hp" "$hc" "$hg"
	printf '%-6s %-10s %10.0f %9s %12s %12s\n' "$round" bench-noop "$br" - "$bc_" "$bg"
	printf '%-6s %-10s %10s %9s %12s %12s %s\n' "$round" takes "$tr" "$tp" "$tc" - "non-2xx: $tbad"
	((used <= 1000)) || { echo "OVERSELL: voucher $s holds $used uses of 1000" >&2; exit 1; }
	[[ $used == 1000 ]] || echo "note: voucher $s holds $used uses of 1000 after 15 s (undersell: writes not settled)"
	H+=("$hr") R+=("$rr") T+=("$tr") B+=("$br") HC+=("$hc") RC+=("$rc") TC+=("$tc")
	RATIO+=("$(echo "$rr / $hr" | bc -l)") BRATIO+=("$(echo "$br / $hr" | bc -l)")
	RP+=("$rp") WG+=("$hg") BG+=("$bg") CR+=("$(echo "$hc / $rc" | bc -l)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "medians of $rounds rounds (wrk -t1 -c$conns -d${secs}s; load average at the end: $load; $(nproc) CPUs)"
printf '%-34s %12s %22s\n' figure median target
printf '%-34s %12.0f %22s\n' "healthz req/s (wrk)" "$(median "${H[@]}")" "(53,000 quiet)"
printf '%-34s %12.0f %22s\n' "refusal req/s (wrk)" "$(median "${R[@]}")" ">= 45,000"
printf '%-34s %12.2f %22s\n' "refusal / healthz (per round)" "$(median "${RATIO[@]}")" ">= 0.85"
printf '%-34s %12.1f %22s\n' "refusal p99 ms" "$(median "${RP[@]}")" "< 100"
printf '%-34s %12.0f %22s\n' "takes/s (wrk)" "$(median "${T[@]}")" ">= 9,600 (1.5 x 6,400)"
printf '%-34s %12.0f %22s\n' "bench --noop req/s" "$(median "${B[@]}")" ""
printf '%-34s %12.2f %22s\n' "bench --noop / wrk healthz" "$(median "${BRATIO[@]}")" ">= 0.90"
printf '%-34s %12.1f %22s\n' "server CPU us/request, healthz" "$(median "${HC[@]}")" ""
printf '%-34s %12.1f %22s\n' "server CPU us/request, refusal" "$(median "${RC[@]}")" ""
printf '%-34s %12.2f %22s\n' "server CPU healthz / refusal" "$(median "${CR[@]}")" "(load-robust 0.85)"
printf '%-34s %12.1f %22s\n' "server CPU us/request, takes" "$(median "${TC[@]}")" "(voucherd only)"
printf '%-34s %12.1f %22s\n' "generator CPU us/request, wrk" "$(median "${WG[@]}")" "(healthz)"
printf '%-34s %12s %22s\n' "generator CPU us/request, bench" "$(median "${BG[@]}")" "(healthz)"
