// Package localstack starts the servers voucherd depends on, PostgreSQL,
// Redis (one server or a Cluster) and Kafka, from locally installed
// binaries as child processes, each with its data and log in a folder the
// caller names, and waits until each answers. `voucherd dev` runs a
// developer's stack with it, `voucherd bench` the stack it measures, and
// the test harness (internal/testenv) its Redis servers and Clusters.
//
// The servers listen on 127.0.0.1 only and trust every local client. Each
// runs in its own process group and, on Linux, dies with its parent
// (internal/localproc), so a stack whose owner crashed leaves no server
// behind. The package reads no flags and no environment: a Config says
// everything.
package localstack

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// defaultStartTimeout bounds one server's start until it answers, when its
// Config leaves StartTimeout zero.
const defaultStartTimeout = 60 * time.Second

// stopGrace is how long a stopped server may take to exit before it is
// killed; Kafka's broker gets kafkaStopGrace.
const stopGrace = 15 * time.Second

// portFree fails when port on 127.0.0.1 is taken, so that a server started
// on a fixed port fails with a message saying why rather than with its own
// log's "address in use".
func portFree(port int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("port %d is taken (another voucherd dev still running?): %w", port, err)
	}
	return ln.Close()
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultStartTimeout
	}
	return d
}
