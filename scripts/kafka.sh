#!/usr/bin/env bash
# kafka.sh: a real Apache Kafka broker for development and tests, without a
# distribution tarball. The broker's jars come from Maven Central through the
# machine's `mvn`; the broker runs as a single KRaft node in combined mode
# (broker + controller) on loopback.
#
#   scripts/kafka.sh fetch                          download the jars once; print the libs dir
#   scripts/kafka.sh classpath                      print the libs dir (fails if not fetched)
#   scripts/kafka.sh start DIR PORT CONTROLLER_PORT format DIR once, then run the broker in the foreground
#
# Environment:
#   VOUCHERD_KAFKA_VERSION  Kafka version (default 4.1.2)
#   VOUCHERD_KAFKA_HOME     cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/kafka-<version>)
#   VOUCHERD_KAFKA_HEAP     JVM heap, -Xmx (default 384m)
#
# Topic auto-creation is OFF in the broker this script starts: voucherd creates
# its topics explicitly (kafkalog.EnsureTopics) with the partition count it
# wants, and a typo in a topic name should fail loudly instead of silently
# creating a one-partition topic nobody reads.
#
# The Go test helper internal/testenv and `voucherd dev --kafka` start the
# broker through internal/kafkaproc, which writes the same server.properties as
# this script; keep the two in step.
set -euo pipefail

KAFKA_VERSION="${VOUCHERD_KAFKA_VERSION:-4.1.2}"
LOG4J_VERSION="2.25.3"
SLF4J_VERSION="2.0.17"
CACHE="${VOUCHERD_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/kafka-${KAFKA_VERSION}}"
LIBS="$CACHE/libs"
MARKER="$CACHE/.complete"
LOG4J_CONFIG="$CACHE/log4j2.properties"

die() {
	echo "kafka.sh: $*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 is not installed; $2"
}

write_log4j_config() {
	# WARN and above to stderr: the broker is chatty at INFO and tests only
	# need to see what went wrong.
	cat >"$LOG4J_CONFIG.tmp" <<'EOF'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
EOF
	mv "$LOG4J_CONFIG.tmp" "$LOG4J_CONFIG"
}

fetch() {
	if [[ -f "$MARKER" ]]; then
		[[ -f "$LOG4J_CONFIG" ]] || write_log4j_config
		echo "$LIBS"
		return 0
	fi
	need java "Kafka $KAFKA_VERSION needs Java 17 or newer (apt-get install openjdk-17-jre-headless)"
	need mvn "it fetches the Kafka jars from Maven Central (apt-get install maven)"

	mkdir -p "$CACHE"
	# Test binaries of several packages may fetch at once: one fetches, the
	# others wait for it and find the marker.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$CACHE/.lock"
		flock 9
		if [[ -f "$MARKER" ]]; then
			[[ -f "$LOG4J_CONFIG" ]] || write_log4j_config
			echo "$LIBS"
			return 0
		fi
	fi

	local tmp
	tmp="$(mktemp -d)"
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	cat >"$tmp/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.voucherd.dev</groupId>
  <artifactId>kafka-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <!-- kafka_2.13 brings slf4j-api 1.7, which cannot see an SLF4J 2
         provider; the 2.x API is compatible with 1.7 callers. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>${SLF4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
EOF
	rm -rf "$LIBS.partial"
	echo "kafka.sh: fetching Kafka $KAFKA_VERSION jars into $LIBS (once, about 100 MB)" >&2
	(cd "$tmp" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
		-DoutputDirectory="$LIBS.partial" -DincludeScope=runtime) >&2 ||
		die "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION (see the output above)"
	ls "$LIBS.partial"/kafka_2.13-*.jar >/dev/null 2>&1 || die "the fetched classpath has no kafka_2.13 jar"
	rm -rf "$LIBS"
	mv "$LIBS.partial" "$LIBS"
	write_log4j_config
	echo "$KAFKA_VERSION" >"$MARKER"
	echo "$LIBS"
}

classpath() {
	[[ -f "$MARKER" ]] || die "Kafka $KAFKA_VERSION is not fetched yet; run: scripts/kafka.sh fetch"
	echo "$LIBS"
}

start() {
	[[ $# -eq 3 ]] || die "usage: kafka.sh start DIR PORT CONTROLLER_PORT"
	local dir="$1" port="$2" cport="$3"
	need java "Kafka $KAFKA_VERSION needs Java 17 or newer (apt-get install openjdk-17-jre-headless)"
	[[ -f "$MARKER" ]] || fetch >/dev/null
	mkdir -p "$dir/data"
	dir="$(cd "$dir" && pwd)"
	local props="$dir/server.properties"
	cat >"$props" <<EOF
# Written by scripts/kafka.sh: one KRaft node in combined mode, loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:${cport}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${cport}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=${dir}/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
	local java_opts=(-Xmx"${VOUCHERD_KAFKA_HEAP:-384m}" -Xms128m -XX:+UseG1GC
		-Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J_CONFIG")
	if [[ ! -f "$dir/data/meta.properties" ]]; then
		local id
		id="$(java -cp "$LIBS/*" "${java_opts[@]}" kafka.tools.StorageTool random-uuid)"
		java -cp "$LIBS/*" "${java_opts[@]}" kafka.tools.StorageTool format --standalone \
			-t "$id" -c "$props" >&2
	fi
	exec java -cp "$LIBS/*" "${java_opts[@]}" kafka.Kafka "$props"
}

cmd="${1:-}"
shift || true
case "$cmd" in
fetch) fetch ;;
classpath) classpath ;;
start) start "$@" ;;
*)
	echo "usage: kafka.sh fetch | classpath | start DIR PORT CONTROLLER_PORT" >&2
	exit 2
	;;
esac
