#!/usr/bin/env bash
# deps.sh: install what voucherd's tests and `voucherd dev` need on this
# machine: PostgreSQL (initdb, postgres), Redis (redis-server, redis-cli),
# and Java 17 plus Maven for the Kafka broker (scripts/kafka.sh).
#
# Idempotent and quiet when everything is present. On Debian/Ubuntu it
# installs what is missing with apt-get (through sudo when not root); on any
# other system it prints what is missing and how to install it, and fails.
#
# Only the binaries are needed: tests and `voucherd dev` start their own
# server processes on free loopback ports, so the postgresql and redis-server
# system services that Debian's packages set up are neither used nor started
# here.
set -euo pipefail

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

# have_java17: a java whose major version is 17 or newer.
have_java17() {
	have java || return 1
	local version major
	version=$(java -version 2>&1 | awk -F '"' '/version/ {print $2; exit}')
	major=${version%%.*}
	[ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
	[ -n "$major" ] && [ "$major" -ge 17 ] 2>/dev/null
}

missing=()   # human-readable names, for messages
packages=()  # Debian packages that provide them
if ! have_pg; then
	missing+=("PostgreSQL (initdb, postgres)")
	packages+=(postgresql)
fi
if ! have redis-server || ! have redis-cli; then
	missing+=("Redis (redis-server, redis-cli)")
	packages+=(redis-server redis-tools)
fi
if ! have_java17; then
	missing+=("Java 17 (java)")
	packages+=(openjdk-17-jre-headless)
fi
if ! have mvn; then
	missing+=("Maven (mvn)")
	packages+=(maven)
fi
# Headless Chromium for the live sale page's browser test.
if ! have chromium; then
	missing+=("Chromium (chromium)")
	packages+=(chromium)
fi

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if ! have apt-get; then
	{
		echo "deps.sh: missing:"
		printf '  - %s\n' "${missing[@]}"
		echo "install them with your package manager; on macOS with Homebrew:"
		echo "  brew install postgresql@16 redis openjdk@17 maven && brew install --cask chromium"
		echo "then make sure initdb, postgres, redis-server, redis-cli, java, mvn and chromium are on PATH."
	} >&2
	exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! have sudo; then
		echo "deps.sh: missing: ${missing[*]}; run as root: apt-get update && apt-get install -y ${packages[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi

echo "deps.sh: installing ${packages[*]}" >&2

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
have_pg || still+=("PostgreSQL (initdb, postgres)")
{ have redis-server && have redis-cli; } || still+=("Redis (redis-server, redis-cli)")
have_java17 || still+=("Java 17 (java)")
have mvn || still+=("Maven (mvn)")
have chromium || still+=("Chromium (chromium)")
if [ ${#still[@]} -ne 0 ]; then
	echo "deps.sh: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
