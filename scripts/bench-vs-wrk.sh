#!/usr/bin/env bash
# Measures `voucherd bench --noop` against wrk on the same route, side by
# side: ROUNDS rounds, each running wrk then voucherd bench for DURATION
# with the same connection count against GET /healthz of a running voucherd,
# then prints the median req/s of each and their ratio.
#
#   scripts/bench-vs-wrk.sh http://127.0.0.1:8080 [rounds=3] [duration=6] [connections=64]
#
# VOUCHERD names the voucherd binary (default: built from this checkout).
set -euo pipefail
url=${1:?usage: $0 BASE_URL [rounds] [seconds] [connections]}
rounds=${2:-3}
secs=${3:-6}
conns=${4:-64}
command -v wrk >/dev/null || { echo "wrk not found (Debian/Ubuntu: apt-get install wrk)" >&2; exit 1; }
bin=${VOUCHERD:-}
if [[ -z $bin ]]; then
	bin=$(mktemp -d)/voucherd
	go build -o "$bin" ./cmd/voucherd
fi
wrk_rates=() bench_rates=()
for ((i = 1; i <= rounds; i++)); do
	w=$(wrk -t1 -c"$conns" -d"${secs}s" "$url/healthz" | awk '/Requests\/sec/ {print $2}')
	b=$("$bin" bench --url "$url" --noop --concurrency "$conns" --duration "${secs}s" --requests 0 --quiet --json |
		awk -F': ' '/"rate"/ {gsub(/,/, "", $2); print $2; exit}')
	printf 'round %d: wrk %.0f req/s, voucherd bench %.0f req/s, ratio %.2f\n' "$i" "$w" "$b" "$(echo "$b / $w" | bc -l)"
	wrk_rates+=("$w") bench_rates+=("$b")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mw=$(median "${wrk_rates[@]}")
mb=$(median "${bench_rates[@]}")
printf 'median of %d: wrk %.0f req/s, voucherd bench %.0f req/s, ratio %.2f\n' "$rounds" "$mw" "$mb" "$(echo "$mb / $mw" | bc -l)"
