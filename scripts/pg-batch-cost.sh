#!/usr/bin/env bash
# PostgreSQL's CPU per voucherd_reserve_batch call, for two voucherd builds
# side by side in one invocation: docs/storage.md ("Format checks without
# counted repetitions").
#
#   scripts/pg-batch-cost.sh OLD_BINARY NEW_BINARY [rounds=3] [batch=25] [calls=1000]
#
# Starts a throwaway PostgreSQL (through `OLD_BINARY dev` in a temporary
# folder; only its PostgreSQL is used), creates one database per binary,
# migrated by that binary, and a voucher HOT of 10^9 uses in each. Each
# round runs pgbench (one client, CALLS transactions, each one batch of
# BATCH new reservations: fresh UUID-shaped orderIds, fresh numeric
# customers) against the old database, then the new one, and sums the CPU
# time of the postmaster and all its children (/proc, including backends
# that exited) around each run. synchronous_commit is off for the pgbench
# role, so the figure is CPU, not fsync waits. Prints ms of PostgreSQL CPU
# per call for each, and the new/old ratio per round and its median.
#
# Environment: PORT_BASE (default 18800: API on it, PostgreSQL +2, Redis +3).
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} batch=${4:-25} calls=${5:-1000}
for c in pgbench psql; do command -v $c >/dev/null || { echo "$c not found (Debian: apt-get install postgresql-client)" >&2; exit 1; }; done
base=${PORT_BASE:-18800}
tmp=$(mktemp -d)
chmod 755 "$tmp"
"$old" dev --dir "$tmp/dev" --reset --addr "127.0.0.1:$base" --pg-port $((base + 2)) --redis-port $((base + 3)) \
	--log-level warn >"$tmp/dev.log" 2>&1 &
dev=$!
cleanup() {
	kill "$dev" 2>/dev/null && wait "$dev" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
for ((i = 0; i < 180; i++)); do
	curl -fs "http://127.0.0.1:$base/readyz" >/dev/null 2>&1 && break
	kill -0 "$dev" 2>/dev/null || { cat "$tmp/dev.log" >&2; exit 1; }
	sleep 0.5
done
sock=$tmp/dev/postgres
sql() { psql -h "$sock" -p $((base + 2)) -U voucherd -X -q -At -v ON_ERROR_STOP=1 "$@"; }
sql -d postgres -c "ALTER ROLE voucherd SET synchronous_commit = off"
for db in old new; do
	sql -d postgres -c "CREATE DATABASE bench_$db"
	bin=$old
	[[ $db == new ]] && bin=$new
	"$bin" migrate --database-url "postgres://voucherd@127.0.0.1:$((base + 2))/bench_$db?sslmode=disable" >/dev/null
	sql -d "bench_$db" -c "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)
		VALUES ('HOT', 100, 1000000000, now() - interval '1 hour', now() + interval '1 day');
		CREATE SEQUENCE bench_ids"
done
cat >"$tmp/batch.sql" <<SQL
WITH ids AS (SELECT nextval('bench_ids') AS i FROM generate_series(1, $batch))
SELECT count(*) FROM voucherd_reserve_batch('HOT',
    (SELECT array_agg((1000000 + i)::text ORDER BY i) FROM ids),
    (SELECT array_agg(md5(i::text)::uuid::text ORDER BY i) FROM ids),
    (SELECT array_agg(5000::bigint) FROM ids),
    (SELECT array_agg(now()) FROM ids),
    interval '10 minutes');
SQL
pm=$(head -1 "$sock/data/postmaster.pid")
ticks() { # the postmaster's own and reaped children's ticks, plus its live children's
	local t p
	t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
	for p in $(pgrep -P "$pm"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
	echo "$t"
}
tck=$(getconf CLK_TCK)
run() { # db -> ms of PostgreSQL CPU per call
	local t0 t1 n0 i
	n0=$(pgrep -c -P "$pm")
	t0=$(ticks)
	pgbench -h "$sock" -p $((base + 2)) -U voucherd -n -c 1 -t "$calls" -f "$tmp/batch.sql" "bench_$1" >"$tmp/pgbench.out" 2>&1 || { cat "$tmp/pgbench.out" >&2; exit 1; }
	# pgbench's backend exits after pgbench does; its time counts once the
	# postmaster has reaped it.
	for ((i = 0; i < 100; i++)); do
		(($(pgrep -c -P "$pm") <= n0)) && break
		sleep 0.05
	done
	t1=$(ticks)
	echo "scale=3; ($t1 - $t0) * 1000 / $tck / $calls" | bc -l
}
run old >/dev/null # warm both databases' caches and plans
run new >/dev/null
declare -a R
printf '%-6s %12s %12s %8s\n' round old_ms/call new_ms/call new/old
for ((r = 1; r <= rounds; r++)); do
	o=$(run old)
	n=$(run new)
	R+=("$(echo "$n / $o" | bc -l)")
	printf '%-6s %12.3f %12.3f %8.2f\n' "$r" "$o" "$n" "${R[-1]}"
done
printf 'median new/old %.2f (batch %d, %d calls per run, load average %s)\n' \
	"$(printf '%s\n' "${R[@]}" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')" \
	"$batch" "$calls" "$(cut -d' ' -f1-3 /proc/loadavg)"
