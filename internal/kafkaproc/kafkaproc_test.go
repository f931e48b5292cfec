package kafkaproc_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/voucherd/voucherd/internal/kafkaproc"
)

// home returns the jar cache, fetching it with scripts/kafka.sh when it is
// missing (the script is idempotent and quick once fetched).
func home(t *testing.T) string {
	t.Helper()
	h := os.Getenv("VOUCHERD_KAFKA_HOME")
	if h == "" {
		var err error
		h, err = kafkaproc.DefaultHome()
		require.NoError(t, err)
	}
	if !kafkaproc.Installed(h) {
		cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "kafka.sh"), "fetch")
		cmd.Env = append(os.Environ(), "VOUCHERD_KAFKA_HOME="+h)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "scripts/kafka.sh fetch:\n%s", out)
	}
	return h
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startOnFreePorts starts a broker on two fresh distinct ports in a fresh
// folder, and again on two others when another process took one before the
// broker bound it (three tries). out holds the last try's output.
func startOnFreePorts(ctx context.Context, t *testing.T, out *bytes.Buffer) (*kafkaproc.Process, kafkaproc.Config) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cfg := kafkaproc.Config{
			Dir: t.TempDir(), Port: freePort(t), ControllerPort: freePort(t),
			Home: home(t), QuickStart: true,
		}
		if cfg.Port == cfg.ControllerPort {
			continue
		}
		out.Reset()
		p, err := kafkaproc.Start(ctx, cfg, out)
		if err != nil && attempt < 3 && strings.Contains(out.String(), "Address already in use") {
			continue
		}
		require.NoError(t, err, "broker output:\n%s", out)
		return p, cfg
	}
}

func TestCommandNeedsJars(t *testing.T) {
	t.Parallel()
	_, err := kafkaproc.Command(context.Background(), kafkaproc.Config{
		Dir: t.TempDir(), Port: 1, ControllerPort: 2, Home: t.TempDir(),
	})
	require.ErrorContains(t, err, "scripts/kafka.sh fetch")

	_, err = kafkaproc.Command(context.Background(), kafkaproc.Config{Dir: t.TempDir(), Port: 5, ControllerPort: 5})
	require.ErrorContains(t, err, "two distinct ports")
}

func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	began := time.Now()
	p, cfg := startOnFreePorts(ctx, t, &out)
	t.Logf("broker ready in %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(p.Kill)

	props, err := os.ReadFile(filepath.Join(cfg.Dir, "server.properties"))
	require.NoError(t, err)
	require.Contains(t, string(props), "auto.create.topics.enable=false")
	require.Contains(t, string(props), "process.roles=broker,controller")

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 2, 1, nil, "kept")
	require.NoError(t, err)

	require.True(t, p.Stop(30*time.Second), "a clean shutdown on SIGTERM")
	<-p.Done()

	// Same dir and ports: no second format, and the topic is still there.
	p, err = kafkaproc.Start(ctx, cfg, &out)
	require.NoError(t, err, "broker output:\n%s", &out)
	t.Cleanup(p.Kill)
	require.Eventually(t, func() bool {
		topics, err := adm.ListTopics(ctx)
		return err == nil && topics.Has("kept")
	}, 20*time.Second, 100*time.Millisecond)
	require.True(t, p.Stop(30*time.Second))
	require.False(t, strings.Contains(out.String(), "ERROR"), "no errors logged:\n%s", &out)
}
