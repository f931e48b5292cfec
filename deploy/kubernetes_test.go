// Package deploy_test checks the Kubernetes manifests under kubernetes/
// against the voucherd binary built from this repository: the subcommands
// and flags their containers run, the VOUCHERD_* variables they set, the
// paths their probes ask for, and the references between the objects.
package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/voucherd/voucherd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const manifestDir = "kubernetes"

// exampleDir holds objects shown as examples and never applied: the
// Secret, whose values each deployment must make its own.
const exampleDir = "kubernetes/example"

// The parts of the objects the checks read.
type (
	meta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	object struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Metadata   meta      `yaml:"metadata"`
		Spec       yaml.Node `yaml:"spec"`
		// ConfigMap and Secret.
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`

		file string
	}
	labelSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	deploymentSpec struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
		Containers                    []container `yaml:"containers"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				ResourceFieldRef *struct {
					Resource string `yaml:"resource"`
				} `yaml:"resourceFieldRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		EnvFrom []struct {
			ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
			SecretRef    *struct{ Name string } `yaml:"secretRef"`
		} `yaml:"envFrom"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		StartupProbe   *probe `yaml:"startupProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	}
	probe struct {
		HTTPGet *struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"`
		} `yaml:"httpGet"`
	}
	serviceSpec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	networkPolicySpec struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []struct {
			From  []yaml.Node `yaml:"from"`
			Ports []struct {
				Port yaml.Node `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	}
	pdbSpec struct {
		MinAvailable *int          `yaml:"minAvailable"`
		Selector     labelSelector `yaml:"selector"`
	}
	hpaSpec struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas *int `yaml:"minReplicas"`
		MaxReplicas int  `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource struct {
				Name string `yaml:"name"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	}
)

// manifests reads every object of the files kustomization.yaml lists, and
// checks that it lists every manifest file there is.
func manifests(t *testing.T) []object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	require.NoError(t, err)
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &kust))
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	require.NoError(t, err)
	var onDisk []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			onDisk = append(onDisk, base)
		}
	}
	listed := slices.Clone(kust.Resources)
	sort.Strings(listed)
	require.Equal(t, onDisk, listed, "kustomization.yaml must list every manifest file, and only those")
	return readObjects(t, manifestDir, kust.Resources)
}

// examples reads the objects of exampleDir.
func examples(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(exampleDir, "*.yaml"))
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	return readObjects(t, exampleDir, names)
}

// readObjects reads every object of the named files of dir.
func readObjects(t *testing.T, dir string, names []string) []object {
	t.Helper()
	var out []object
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, name)
			require.NotEmpty(t, o.APIVersion, "%s: an object without apiVersion", name)
			require.NotEmpty(t, o.Kind, "%s: an object without kind", name)
			require.NotEmpty(t, o.Metadata.Name, "%s: a %s without a name", name, o.Kind)
			o.file = name
			out = append(out, o)
		}
	}
	return out
}

func decodeSpec[T any](t *testing.T, o object) T {
	t.Helper()
	var spec T
	require.NoError(t, o.Spec.Decode(&spec), "%s: %s %s", o.file, o.Kind, o.Metadata.Name)
	return spec
}

func byKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// buildVoucherd builds the binary the image runs.
func buildVoucherd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "voucherd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/voucherd")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/voucherd:\n%s", out)
	return bin
}

// subcommands lists the commands `voucherd help` names.
func subcommands(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "help").Output()
	require.NoError(t, err)
	_, list, ok := strings.Cut(string(out), "Commands:\n")
	require.True(t, ok, "voucherd help lists no commands:\n%s", out)
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	require.NotEmpty(t, names)
	return names
}

var (
	// helpEnv matches a variable a flag reads, as its help names it:
	// "... (VOUCHERD_ADDR)".
	helpEnv = regexp.MustCompile(`\((VOUCHERD_[A-Z0-9_]+)\)`)
	// helpEnvOnly matches a line of the "Environment only" part of the help.
	helpEnvOnly = regexp.MustCompile(`(?m)^  (VOUCHERD_[A-Z0-9_]+)\s`)
)

// acceptedEnv runs `voucherd ARGS... --help`, which must succeed (so the
// arguments are a subcommand and flags it accepts), and returns the
// VOUCHERD_* variables its help says it reads.
func acceptedEnv(t *testing.T, bin string, args []string) map[string]bool {
	t.Helper()
	cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
	cmd.Env = []string{} // the help's defaults, not this machine's settings
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "voucherd %s --help: the arguments are not valid:\n%s", strings.Join(args, " "), out)
	names := map[string]bool{}
	for _, m := range helpEnv.FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	for _, m := range helpEnvOnly.FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	require.NotEmpty(t, names, "voucherd %s --help names no variables:\n%s", strings.Join(args, " "), out)
	return names
}

// sourceEnv returns the variables an envFrom source provides.
func sourceEnv(t *testing.T, objs []object, kind, name string) map[string]string {
	t.Helper()
	o, ok := find(objs, kind, name)
	require.True(t, ok, "envFrom names %s %q, which no manifest defines", kind, name)
	env := map[string]string{}
	for k, v := range o.Data {
		env[k] = v
	}
	for k, v := range o.StringData {
		env[k] = v
	}
	return env
}

// inReadme reports whether README.md names the variable, in full or in its
// configuration table's short form (`VOUCHERD_KAFKA_TOPIC` / `_DLQ_TOPIC`).
func inReadme(readme, name string) bool {
	if strings.Contains(readme, "`"+name+"`") {
		return true
	}
	for i, r := range name {
		if r == '_' && strings.Contains(readme, "`"+name[i:]+"`") {
			return true
		}
	}
	return false
}

// TestKubernetesManifests checks every object's references and every
// container against the binary: a valid subcommand with valid flags,
// VOUCHERD_* variables it reads (and README.md documents), named ports, and
// probe paths that the server answers (TestKubernetesProbesServed).
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := manifests(t)
	// The applied set holds no Secret: one shipped here would be a
	// password known to everyone. The Deployments' Secret is an example.
	require.Empty(t, byKind(objs, "Secret"), "kustomization.yaml applies a Secret")
	sources := append(slices.Clone(objs), examples(t)...)
	bin := buildVoucherd(t)
	commands := subcommands(t, bin)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)

	deployments := byKind(objs, "Deployment")
	require.NotEmpty(t, deployments)
	var runs []string // subcommands the Deployments run
	var apiService, apiPDB bool
	// envFrom sources and whether some container using them reads each key.
	sourceKeysRead := map[string]map[string]bool{}
	for _, d := range deployments {
		spec := decodeSpec[deploymentSpec](t, d)
		require.True(t, subset(spec.Selector.MatchLabels, spec.Template.Metadata.Labels),
			"Deployment %s: its selector does not match its pods' labels", d.Metadata.Name)
		require.NotEmpty(t, spec.Template.Spec.Containers)
		for _, c := range spec.Template.Spec.Containers {
			where := fmt.Sprintf("Deployment %s, container %s", d.Metadata.Name, c.Name)
			require.Empty(t, c.Command, "%s: the image's entrypoint is voucherd; give the subcommand in args", where)
			require.NotEmpty(t, c.Args, "%s: no subcommand in args", where)
			require.Contains(t, commands, c.Args[0], "%s: %q is not a voucherd subcommand", where, c.Args[0])
			require.NotContains(t, []string{"dev", "bench", "help", "version"}, c.Args[0], "%s: not a server subcommand", where)
			runs = append(runs, c.Args[0])
			require.Contains(t, c.Resources.Requests, "cpu", "%s: no CPU request (the autoscaler scales against it)", where)

			accepted := acceptedEnv(t, bin, c.Args)
			env := map[string]string{}
			procs := false
			for _, e := range c.Env {
				if e.Name == "GOMAXPROCS" { // Go's own: one P per CPU requested
					require.True(t, e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
						e.ValueFrom.ResourceFieldRef.Resource == "requests.cpu", "%s: GOMAXPROCS not from requests.cpu", where)
					procs = true
					continue
				}
				require.True(t, accepted[e.Name], "%s: env %s is not read by voucherd %s", where, e.Name, c.Args[0])
				env[e.Name] = e.Value
			}
			require.True(t, procs, "%s: GOMAXPROCS is not set from the CPU request (Go would run a P per node CPU)", where)
			for _, from := range c.EnvFrom {
				var kind, name string
				switch {
				case from.ConfigMapRef != nil:
					kind, name = "ConfigMap", from.ConfigMapRef.Name
				case from.SecretRef != nil:
					kind, name = "Secret", from.SecretRef.Name
				default:
					t.Fatalf("%s: envFrom without configMapRef or secretRef", where)
				}
				key := kind + "/" + name
				if sourceKeysRead[key] == nil {
					sourceKeysRead[key] = map[string]bool{}
				}
				for k, v := range sourceEnv(t, sources, kind, name) {
					sourceKeysRead[key][k] = sourceKeysRead[key][k] || accepted[k]
					env[k] = v
				}
			}
			for name := range env {
				require.True(t, inReadme(string(readme), name), "%s: %s is not described in README.md", where, name)
			}
			if c.Args[0] != "serve" {
				continue
			}
			// The API container: it reads its configuration and tokens, and
			// listens where its port and probes say.
			for _, name := range []string{"VOUCHERD_DATABASE_URL", "VOUCHERD_API_TOKEN", "VOUCHERD_ADMIN_TOKEN", "VOUCHERD_ADDR"} {
				require.Contains(t, env, name, "%s: %s is not set", where, name)
			}
			_, port, err := net.SplitHostPort(env["VOUCHERD_ADDR"])
			require.NoError(t, err)
			listen, err := strconv.Atoi(port)
			require.NoError(t, err)
			ports := map[string]int{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
				addr, what := env["VOUCHERD_ADDR"], "VOUCHERD_ADDR"
				if p.Name == "metrics" {
					addr, what = env["VOUCHERD_METRICS_ADDR"], "VOUCHERD_METRICS_ADDR"
				}
				_, port, err := net.SplitHostPort(addr)
				require.NoError(t, err, "%s: port %s: %s", where, p.Name, what)
				require.Equal(t, port, strconv.Itoa(p.ContainerPort), "%s: port %s is not %s's", where, p.Name, what)
			}
			for kind, p := range map[string]*probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				require.NotNil(t, p, "%s: no %s probe", where, kind)
				require.NotNil(t, p.HTTPGet, "%s: the %s probe is not an HTTP GET", where, kind)
				require.Equal(t, listen, resolvePort(t, p.HTTPGet.Port, ports), "%s: the %s probe asks another port", where, kind)
			}
			require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, where)
			require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, where)
			if grace := spec.Template.Spec.TerminationGracePeriodSeconds; grace != nil {
				shutdown, err := time.ParseDuration(env["VOUCHERD_SHUTDOWN_TIMEOUT"])
				require.NoError(t, err, "%s: VOUCHERD_SHUTDOWN_TIMEOUT", where)
				require.Greater(t, time.Duration(*grace)*time.Second, shutdown,
					"%s: terminationGracePeriodSeconds must exceed VOUCHERD_SHUTDOWN_TIMEOUT, or drains end in SIGKILL", where)
			}

			// Everything that points at this Deployment's pods.
			for _, s := range byKind(objs, "Service") {
				ss := decodeSpec[serviceSpec](t, s)
				if !subset(ss.Selector, spec.Template.Metadata.Labels) {
					continue
				}
				for _, p := range ss.Ports {
					require.Equal(t, listen, resolvePort(t, p.TargetPort, ports), "Service %s: targetPort", s.Metadata.Name)
				}
				apiService = true
			}
			policed := false
			for _, np := range byKind(objs, "NetworkPolicy") {
				ns := decodeSpec[networkPolicySpec](t, np)
				if !subset(ns.PodSelector.MatchLabels, spec.Template.Metadata.Labels) {
					continue
				}
				policed = true
				require.Contains(t, ns.PolicyTypes, "Ingress", "NetworkPolicy %s", np.Metadata.Name)
				for _, rule := range ns.Ingress {
					require.NotEmpty(t, rule.From, "NetworkPolicy %s: a rule open to every source", np.Metadata.Name)
					for _, p := range rule.Ports {
						resolvePort(t, p.Port, ports)
					}
				}
			}
			require.True(t, policed, "%s: no NetworkPolicy selects the API pods", where)
			for _, p := range byKind(objs, "PodDisruptionBudget") {
				ps := decodeSpec[pdbSpec](t, p)
				require.True(t, subset(ps.Selector.MatchLabels, spec.Template.Metadata.Labels),
					"PodDisruptionBudget %s selects no API pod", p.Metadata.Name)
				require.NotNil(t, ps.MinAvailable)
				require.NotNil(t, spec.Replicas)
				require.Less(t, *ps.MinAvailable, *spec.Replicas, "PodDisruptionBudget %s would block every drain", p.Metadata.Name)
				apiPDB = true
			}
		}
	}
	require.Contains(t, runs, "serve", "no Deployment runs voucherd serve")
	require.Contains(t, runs, "consume", "no Deployment runs voucherd consume")
	require.True(t, apiService, "no Service selects the API pods")
	require.True(t, apiPDB, "no PodDisruptionBudget covers the API pods")
	for src, keys := range sourceKeysRead {
		for k, read := range keys {
			require.True(t, read, "%s: %s is read by none of the containers that use it", src, k)
		}
	}
	for _, kind := range []string{"ConfigMap", "Secret"} {
		for _, o := range byKind(objs, kind) {
			require.Contains(t, sourceKeysRead, kind+"/"+o.Metadata.Name, "%s %s is used by no container", kind, o.Metadata.Name)
		}
	}

	hpas := byKind(objs, "HorizontalPodAutoscaler")
	require.NotEmpty(t, hpas, "no HorizontalPodAutoscaler")
	for _, h := range hpas {
		require.Equal(t, "autoscaling/v2", h.APIVersion)
		hs := decodeSpec[hpaSpec](t, h)
		require.Equal(t, "Deployment", hs.ScaleTargetRef.Kind)
		target, ok := find(objs, "Deployment", hs.ScaleTargetRef.Name)
		require.True(t, ok, "HorizontalPodAutoscaler %s scales a Deployment no manifest defines", h.Metadata.Name)
		ts := decodeSpec[deploymentSpec](t, target)
		require.Equal(t, "serve", ts.Template.Spec.Containers[0].Args[0], "the autoscaler scales the API")
		require.Len(t, hs.Metrics, 1)
		require.Equal(t, "Resource", hs.Metrics[0].Type)
		require.Equal(t, "cpu", hs.Metrics[0].Resource.Name)
		require.NotNil(t, hs.MinReplicas)
		require.LessOrEqual(t, *hs.MinReplicas, hs.MaxReplicas)
	}
}

// resolvePort returns the number a probe's or Service's port means: a
// number, or the name of one of the container's ports.
func resolvePort(t *testing.T, n yaml.Node, ports map[string]int) int {
	t.Helper()
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	p, ok := ports[n.Value]
	require.True(t, ok, "port %q names no container port", n.Value)
	return p
}

// TestKubernetesProbesServed runs each Deployment's `voucherd serve`
// container as the manifests configure it, with the addresses of throwaway
// PostgreSQL and Redis servers (and sync writes, for want of a broker), and
// asks each of its probes' paths: every one must answer 200.
func TestKubernetesProbesServed(t *testing.T) {
	t.Parallel()
	objs := append(manifests(t), examples(t)...)
	bin := buildVoucherd(t)
	pg := testenv.Postgres(t)
	redis := testenv.Redis(t)
	served := 0
	for _, d := range byKind(objs, "Deployment") {
		spec := decodeSpec[deploymentSpec](t, d)
		for _, c := range spec.Template.Spec.Containers {
			if c.Args[0] != "serve" {
				continue
			}
			env := map[string]string{}
			for _, from := range c.EnvFrom {
				switch {
				case from.ConfigMapRef != nil:
					maps.Copy(env, sourceEnv(t, objs, "ConfigMap", from.ConfigMapRef.Name))
				case from.SecretRef != nil:
					maps.Copy(env, sourceEnv(t, objs, "Secret", from.SecretRef.Name))
				}
			}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			port, metricsPort := freePort(t), freePort(t)
			env["VOUCHERD_ADDR"] = fmt.Sprintf("127.0.0.1:%d", port)
			if _, ok := env["VOUCHERD_METRICS_ADDR"]; ok {
				env["VOUCHERD_METRICS_ADDR"] = fmt.Sprintf("127.0.0.1:%d", metricsPort)
			}
			// The example Secret's placeholders, which voucherd refuses.
			env["VOUCHERD_API_TOKEN"], env["VOUCHERD_ADMIN_TOKEN"] = "k8s-test-api", "k8s-test-admin"
			delete(env, "VOUCHERD_READ_KEYS")
			env["VOUCHERD_DATABASE_URL"] = pg.URL
			env["VOUCHERD_REDIS_ADDR"] = redis.Addr
			env["VOUCHERD_REDIS_KEY_PREFIX"] = fmt.Sprintf("k8s%d:", port)
			env["VOUCHERD_FLASH_WRITES"] = "sync"
			delete(env, "VOUCHERD_KAFKA_BROKERS")

			ctx, cancel := context.WithCancel(context.Background())
			cmd := exec.CommandContext(ctx, bin, c.Args...)
			cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
			cmd.WaitDelay = 30 * time.Second
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cancel(); _ = cmd.Wait() })

			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			for _, p := range []*probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
				if p == nil || p.HTTPGet == nil {
					continue
				}
				require.Eventually(t, func() bool {
					resp, err := http.Get(base + p.HTTPGet.Path)
					if err != nil {
						return false
					}
					_ = resp.Body.Close()
					return resp.StatusCode == http.StatusOK
				}, 60*time.Second, 100*time.Millisecond,
					"Deployment %s: GET %s never answered 200; voucherd's output:\n%s", d.Metadata.Name, p.HTTPGet.Path, &out)
				served++
			}
			if _, ok := env["VOUCHERD_METRICS_ADDR"]; ok {
				// Prometheus scrapes the metrics port without a key; the
				// API port has no /metrics.
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode, "Deployment %s: the metrics port", d.Metadata.Name)
				resp, err = http.Get(base + "/metrics")
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.NotEqual(t, http.StatusOK, resp.StatusCode, "Deployment %s: /metrics on the API port", d.Metadata.Name)
			}
		}
	}
	require.NotZero(t, served, "no probe was tried")
}

// lockedBuffer collects a process's output, safe to read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// TestKubernetesExampleSecretRefused: the example Secret, applied as it is,
// starts no API pod: voucherd refuses its placeholder tokens.
func TestKubernetesExampleSecretRefused(t *testing.T) {
	t.Parallel()
	secrets := byKind(examples(t), "Secret")
	require.NotEmpty(t, secrets, "no example Secret")
	bin := buildVoucherd(t)
	for _, sec := range secrets {
		env := []string{"VOUCHERD_ADDR=127.0.0.1:0"}
		for k, v := range sec.StringData {
			env = append(env, k+"="+v)
		}
		cmd := exec.Command(bin, "serve")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "Secret %s: voucherd started with its placeholders:\n%s", sec.Metadata.Name, out)
		require.Contains(t, string(out), "change-me", "Secret %s", sec.Metadata.Name)
	}
}
