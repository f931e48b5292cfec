#!/usr/bin/env bash
# deps.sh [run|kafka|test]: install what one use of voucherd needs on this
# machine, and nothing more:
#   run    `voucherd dev` (make run): PostgreSQL (initdb, postgres) and Redis
#          (redis-server, redis-cli).
#   kafka  `voucherd dev --kafka` (make run ARGS=--kafka): run, plus Java 17
#          and Maven for the Kafka broker (scripts/kafka.sh fetches its jars).
#   test   the test suite (make test): kafka, plus headless Chromium for the
#          live page's browser test, curl for the README's examples,
#          Python 3 with venv for Schemathesis (scripts/schemathesis.sh) and
#          openapi-python-client (scripts/openapi-python-client.sh), and
#          promtool to check deploy/prometheus-rules.yaml.
# Without an argument: test.
#
# Idempotent and quiet when everything is present. On Debian/Ubuntu it
# installs what is missing with apt-get (as root, or through sudo); on any
# other system (macOS, for example) it prints what is missing and the
# command that installs it, and fails.
#
# Only the binaries are needed: tests and `voucherd dev` start their own
# server processes on free loopback ports, so the postgresql and redis-server
# system services that Debian's packages set up are neither used nor started
# here.
set -euo pipefail

profile=${1:-test}
case "$profile" in
run | kafka | test) ;;
*)
	echo "usage: scripts/deps.sh [run|kafka|test]" >&2
	exit 2
	;;
esac

have() { command -v "$1" >/dev/null 2>&1; }

# have_pg: initdb and postgres on PATH, or in a versioned Debian directory
# (Debian does not put them on PATH).
have_pg() {
	local dir
	if have initdb && have postgres; then
		return 0
	fi
	for dir in /usr/lib/postgresql/*/bin; do
		if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
			return 0
		fi
	done
	return 1
}

have_redis() { have redis-server && have redis-cli; }

# have_java17: a java whose major version is 17 or newer.
have_java17() {
	have java || return 1
	local version major
	version=$(java -version 2>&1 | awk -F '"' '/version/ {print $2; exit}')
	major=${version%%.*}
	[ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
	[ -n "$major" ] && [ "$major" -ge 17 ] 2>/dev/null
}

have_mvn() { have mvn; }
have_chromium() { have chromium; }
have_curl() { have curl; }
have_promtool() { have promtool; }
have_openssl() { have openssl; }
have_venv() { have python3 && python3 -c 'import venv, ensurepip' >/dev/null 2>&1; }

# Each requirement: "check|what it is|Debian packages|Homebrew install".
requirements=(
	"have_pg|PostgreSQL (initdb, postgres)|postgresql|brew install postgresql@16"
	"have_redis|Redis (redis-server, redis-cli)|redis-server redis-tools|brew install redis"
)
if [ "$profile" != run ]; then
	requirements+=(
		"have_java17|Java 17 (java), for the Kafka broker|openjdk-17-jre-headless|brew install openjdk@17"
		"have_mvn|Maven (mvn), to fetch the Kafka jars|maven|brew install maven"
	)
fi
if [ "$profile" = test ]; then
	requirements+=(
		"have_chromium|Chromium (chromium), for the live page's browser test|chromium|brew install --cask chromium"
		"have_curl|curl, for the README's examples test|curl ca-certificates|brew install curl"
		"have_venv|Python 3 with venv, for Schemathesis|python3 python3-venv|brew install python"
		"have_promtool|promtool, to check the alert rules|prometheus|brew install prometheus"
		"have_openssl|openssl, for the README's webhook signature check|openssl|brew install openssl"
	)
fi

missing=()  # what it is, for messages
packages=() # Debian packages that provide it
brews=()    # Homebrew commands that install it
for req in "${requirements[@]}"; do
	IFS='|' read -r check what debs brew <<<"$req"
	if ! "$check"; then
		missing+=("$what")
		read -ra debs_a <<<"$debs"
		packages+=("${debs_a[@]}")
		brews+=("$brew")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if ! have apt-get; then
	{
		echo "deps.sh ($profile): missing:"
		printf '  - %s\n' "${missing[@]}"
		echo "install them with your package manager; on macOS with Homebrew:"
		printf '  %s\n' "${brews[@]}"
		echo "then make sure the commands named above are on PATH (Homebrew's postgresql@16,"
		echo "openjdk@17 and curl are keg-only: add their bin folders, as brew's output says)."
	} >&2
	exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! have sudo; then
		echo "deps.sh ($profile): missing: ${missing[*]}; run as root: apt-get update && apt-get install -y ${packages[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi

echo "deps.sh ($profile): installing ${packages[*]}" >&2

# Keep the packages' system services from starting: nothing uses them, and a
# stray PostgreSQL or Redis would only take memory. policy-rc.d is Debian's
# switch for that; leave one that was already there alone.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	trap '"${sudo[@]}" rm -f "$policy"' EXIT
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod 755 "$policy"
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null

# Check again: a package can install without putting the binary where we look.
still=()
for req in "${requirements[@]}"; do
	IFS='|' read -r check what _ _ <<<"$req"
	"$check" || still+=("$what")
done
if [ ${#still[@]} -ne 0 ]; then
	echo "deps.sh ($profile): still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
