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
	"slices"
	"strconv"
	"time"

	"github.com/voucherd/voucherd/internal/localproc"
)

// defaultStartTimeout bounds one server's start until it answers, when its
// Config leaves StartTimeout zero.
const defaultStartTimeout = 60 * time.Second

// stopGrace is how long a stopped server may take to exit before it is
// killed; Kafka's broker gets kafkaStopGrace.
const stopGrace = 15 * time.Second

// portTakenError is the error of a start that found a port on 127.0.0.1
// taken before its server bound it.
type portTakenError struct {
	port int // the taken port; 0 when err names it
	err  error
}

func (e *portTakenError) Error() string {
	if e.port == 0 {
		return e.err.Error()
	}
	return fmt.Sprintf("port %d is taken (another voucherd dev still running?): %v", e.port, e.err)
}

func (e *portTakenError) Unwrap() error { return e.err }

// portFree fails with a *portTakenError when port on 127.0.0.1 is taken, so
// that a server started on a fixed port fails with a message saying why
// rather than with its own log's "address in use".
func portFree(port int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return &portTakenError{port: port, err: err}
	}
	return ln.Close()
}

// freePorts returns n distinct loopback ports that were free a moment ago
// (localproc.FreePort).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		port, err := localproc.FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultStartTimeout
	}
	return d
}
