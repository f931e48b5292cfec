#!/usr/bin/env bash
# PostgreSQL's CPU per row written by a take, for several variants side by
# side in one throwaway PostgreSQL: the set-based floor (the rows a take
# writes, written by plain statements) and the write functions of voucherd
# builds. docs/storage.md ("What a take costs against its rows").
#
#   scripts/pg-take-cost.sh [-r rounds] [-b batch] [-c calls] [-s schema_binary] VARIANT...
#
# VARIANT is one of
#   floor[+MOD...]  per transaction, BATCH new redemptions of voucher HOT
#                   (one INSERT of BATCH rows into voucher_redemption, one
#                   of BATCH new voucher_customer_usage counters, one UPDATE
#                   of the voucher's used_count): what a take writes, in the
#                   schema migrated by the schema binary (-s, default the
#                   first binary named by a function variant), with its
#                   indexes, CHECKs, foreign key and triggers. MODs change
#                   that database first: notrig (the limit and event
#                   triggers disabled), ~TRIGGER (that trigger of
#                   voucher_redemption disabled), nofk (the redemption's
#                   foreign key dropped), -INDEX (that index dropped),
#                   @FILE (the SQL file run in it).
#   batch:BINARY    voucherd_reserve_batch of BATCH new reservations
#                   (fresh orderIds and customers) in the schema BINARY
#                   migrates; what the write combiner sends.
#   one:BINARY      voucherd_reserve_one, one reservation per transaction.
#   apply:BINARY    voucherd_apply_reserved_codes of BATCH new events (the
#                   Kafka consumer's apply).
#   expire:BINARY   per call, BATCH holds already due, written as the floor
#                   writes them, then voucherd_expire releasing them (two
#                   transactions): compare two builds, the writes are the
#                   same.
#
# Each variant gets a database of its own in one PostgreSQL started here
# (initdb and postgres from PATH or pg_config --bindir; run as the postgres
# or nobody user when root), with a voucher HOT of 10^9 uses. Each round
# runs pgbench (one client, CALLS transactions; one transaction per call)
# against every variant in turn, and sums the CPU time of the postmaster and
# all its children (/proc, including backends that exited) around each run.
# synchronous_commit is off, so the figure is CPU, not fsync waits.
# Prints µs of PostgreSQL CPU per row written (per take) for each variant,
# and each one's ratio to the first variant, per round and as a median.
#
# Environment: PORT (default 18850).
set -euo pipefail
rounds=3 batch=25 calls=1000 schema=
while getopts r:b:c:s: o; do
	case $o in
	r) rounds=$OPTARG ;;
	b) batch=$OPTARG ;;
	c) calls=$OPTARG ;;
	s) schema=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
(($# > 0)) || { sed -n '2,43p' "$0" >&2; exit 2; }
variants=("$@")
for c in pgbench psql bc; do command -v $c >/dev/null || { echo "$c not found" >&2; exit 1; }; done
bindir=$(dirname "$(command -v initdb 2>/dev/null || echo "$(pg_config --bindir)/initdb")")
[[ -x $bindir/initdb ]] || { echo "initdb not found" >&2; exit 1; }
if [[ -z $schema ]]; then
	for v in "${variants[@]}"; do
		[[ $v == *:* ]] && { schema=${v#*:}; break; }
	done
fi
port=${PORT:-18850}
tmp=$(mktemp -d)
chmod 755 "$tmp"
as=()
if ((EUID == 0)); then
	u=postgres
	id $u >/dev/null 2>&1 || u=nobody
	chown "$u" "$tmp"
	as=(setpriv --reuid "$u" --regid "$(id -g $u)" --clear-groups)
fi
"${as[@]}" "$bindir/initdb" -D "$tmp/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >/dev/null
"${as[@]}" "$bindir/postgres" -D "$tmp/data" -p "$port" -k "$tmp" -c listen_addresses=127.0.0.1 \
	-c synchronous_commit=off -c shared_buffers=128MB >"$tmp/pg.log" 2>&1 &
pm=$!
cleanup() {
	kill "$pm" 2>/dev/null && wait "$pm" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
for ((i = 0; i < 100; i++)); do
	pg_isready -q -h "$tmp" -p "$port" && break
	kill -0 "$pm" 2>/dev/null || { cat "$tmp/pg.log" >&2; exit 1; }
	sleep 0.2
done
sql() { psql -h "$tmp" -p "$port" -U postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }

setup() { # n variant: database vN, migrated, with voucher HOT and the pgbench script
	local n=$1 v=$2 bin mods m db=v$1
	bin=${v#*:}
	[[ $v == *:* ]] || bin=$schema
	[[ -n $bin ]] || { echo "floor needs a schema binary (-s)" >&2; exit 2; }
	sql -d postgres -c "CREATE DATABASE $db"
	"$bin" migrate --database-url "postgres://postgres@127.0.0.1:$port/$db?sslmode=disable" >/dev/null
	sql -d $db -c "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)
		VALUES ('HOT', 100, 1000000000, now() - interval '1 hour', now() + interval '1 day');
		CREATE SEQUENCE bench_ids"
	local ids="WITH ids AS MATERIALIZED (SELECT nextval('bench_ids') AS i FROM generate_series(1, $batch))"
	case $v in
	floor*)
		IFS=+ read -ra mods <<<"${v#floor}"
		for m in "${mods[@]}"; do
			case $m in
			'') ;;
			notrig) sql -d $db -c "ALTER TABLE voucher_redemption DISABLE TRIGGER voucher_redemption_limits,
				DISABLE TRIGGER voucher_redemption_limits_update, DISABLE TRIGGER voucherd_event_redemption_insert,
				DISABLE TRIGGER voucherd_event_redemption_update" 2>/dev/null ||
				sql -d $db -c "DO \$\$ DECLARE t text; BEGIN
					FOR t IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'voucher_redemption'::regclass
					         AND NOT tgisinternal AND tgname <> 'voucher_redemption_customer_from_legacy' LOOP
						EXECUTE format('ALTER TABLE voucher_redemption DISABLE TRIGGER %I', t);
					END LOOP; END \$\$" ;;
			nofk) sql -d $db -c "ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_voucher_fkey" ;;
			~*) sql -d $db -c "ALTER TABLE voucher_redemption DISABLE TRIGGER ${m#\~}" ;;
			-*) sql -d $db -c "DROP INDEX ${m#-}" ;;
			@*) sql -d $db -f "${m#@}" ;;
			*) echo "unknown modification $m of $v" >&2; exit 2 ;;
			esac
		done
		cat >"$tmp/$db.sql" <<SQL
$ids,
r AS (INSERT INTO voucher_redemption (order_id, voucher_code, customer, customer_id, order_amount, discount_amount,
                                      status, created_at, updated_at, expires_at)
      SELECT md5(i::text)::uuid::text, 'HOT', (1000000 + i)::text, 1000000 + i, 5000, 100,
             'RESERVED', now(), now(), now() + interval '10 minutes' FROM ids ORDER BY 1),
u AS (INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held)
      SELECT 'HOT', (1000000 + i)::text, 1000000 + i, 1 FROM ids ORDER BY 2)
UPDATE voucher SET used_count = used_count + $batch WHERE code = 'HOT';
SQL
		echo "$batch" >"$tmp/$db.rows" ;;
	batch:*)
		cat >"$tmp/$db.sql" <<SQL
$ids
SELECT count(*)
FROM (SELECT array_agg((1000000 + i)::text ORDER BY i) AS customers, array_agg(md5(i::text)::uuid::text ORDER BY i) AS orders,
             array_agg(5000::bigint) AS amounts, array_agg(now()) AS nows FROM ids) AS a,
     voucherd_reserve_batch('HOT', a.customers, a.orders, a.amounts, a.nows, interval '10 minutes') AS b;
SQL
		echo "$batch" >"$tmp/$db.rows" ;;
	one:*)
		cat >"$tmp/$db.sql" <<SQL
SELECT nextval('bench_ids') AS i \gset
SELECT (voucherd_reserve_one('HOT', (1000000 + :i)::text, md5(:i::text)::uuid::text, 5000, now(),
                             interval '10 minutes')).replay;
SQL
		echo 1 >"$tmp/$db.rows" ;;
	apply:*)
		cat >"$tmp/$db.sql" <<SQL
$ids
SELECT count(*)
FROM (SELECT array_agg(md5(i::text)::uuid::text ORDER BY i) AS orders, array_agg('HOT'::text) AS codes,
             array_agg((1000000 + i)::text ORDER BY i) AS customers, array_agg(5000::bigint) AS amounts,
             array_agg(100::bigint) AS discounts, array_agg(now()) AS nows,
             array_agg(now() + interval '10 minutes') AS expires FROM ids) AS a,
     voucherd_apply_reserved_codes(a.orders, a.codes, a.customers, a.amounts, a.discounts, a.nows, a.expires, NULL) AS b;
SQL
		echo "$batch" >"$tmp/$db.rows" ;;
	expire:*)
		cat >"$tmp/$db.sql" <<SQL
$ids,
r AS (INSERT INTO voucher_redemption (order_id, voucher_code, customer, customer_id, order_amount, discount_amount,
                                      status, created_at, updated_at, expires_at)
      SELECT md5(i::text)::uuid::text, 'HOT', (1000000 + i)::text, 1000000 + i, 5000, 100,
             'RESERVED', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 minute'
      FROM ids ORDER BY 1),
u AS (INSERT INTO voucher_customer_usage (voucher_code, customer, customer_id, held)
      SELECT 'HOT', (1000000 + i)::text, 1000000 + i, 1 FROM ids ORDER BY 2)
UPDATE voucher SET used_count = used_count + $batch WHERE code = 'HOT';
SELECT count(*) FROM voucherd_expire(now(), $batch);
SQL
		echo "$batch" >"$tmp/$db.rows" ;;
	*) echo "unknown variant $v" >&2; exit 2 ;;
	esac
}
for i in "${!variants[@]}"; do setup "$i" "${variants[$i]}"; done

ticks() { # the postmaster's own and reaped children's ticks, plus its live children's
	local t p
	t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
	for p in $(pgrep -P "$pm"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
	echo "$t"
}
tck=$(getconf CLK_TCK)
run() { # n -> µs of PostgreSQL CPU per row
	local t0 t1 n0 i
	n0=$(pgrep -c -P "$pm")
	t0=$(ticks)
	pgbench -h "$tmp" -p "$port" -U postgres -n -c 1 -t "$calls" -f "$tmp/v$1.sql" "v$1" >"$tmp/pgbench.out" 2>&1 ||
		{ cat "$tmp/pgbench.out" >&2; exit 1; }
	# pgbench's backend exits after pgbench does; its time counts once the
	# postmaster has reaped it.
	for ((i = 0; i < 100; i++)); do
		(($(pgrep -c -P "$pm") <= n0)) && break
		sleep 0.05
	done
	t1=$(ticks)
	echo "scale=3; ($t1 - $t0) * 1000000 / $tck / $calls / $(cat "$tmp/v$1.rows")" | bc -l
}
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for i in "${!variants[@]}"; do run "$i" >/dev/null; done # warm caches and plans
declare -A U
printf '%-6s' round
for v in "${variants[@]}"; do printf ' %14.14s' "$(basename "$v")"; done
echo
for ((r = 1; r <= rounds; r++)); do
	printf '%-6s' "$r"
	for i in "${!variants[@]}"; do
		U[$i,$r]=$(run "$i")
		printf ' %14.1f' "${U[$i,$r]}"
	done
	echo
done
echo "µs of PostgreSQL CPU per row (take); medians, and ratio to the first variant (median of per-round ratios):"
for i in "${!variants[@]}"; do
	m=$(for ((r = 1; r <= rounds; r++)); do echo "${U[$i,$r]}"; done | median)
	q=$(for ((r = 1; r <= rounds; r++)); do echo "${U[$i,$r]} / ${U[0,$r]}" | bc -l; done | median)
	printf '  %-60s %8.1f µs  %5.2fx\n' "${variants[$i]}" "$m" "$q"
done
printf 'batch %d, %d calls per run, %d rounds, load average %s\n' "$batch" "$calls" "$rounds" "$(cut -d' ' -f1-3 /proc/loadavg)"
