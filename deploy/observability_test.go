package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/voucherd/voucherd/internal/metrics"
)

const (
	rulesFile     = "prometheus-rules.yaml"
	dashboardFile = "grafana-dashboard.json"
)

// exportedMetrics returns the names of the series voucherd exports,
// collected from the metrics package's registry: each collector's name,
// and for histograms and summaries its _bucket, _sum and _count series.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New(metrics.Counts{})
	descs := make(chan *prometheus.Desc)
	go func() {
		m.Registry.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, match, "a descriptor without a name: %s", d)
		names[match[1]] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			names[match[1]+suffix] = true
		}
	}
	require.Contains(t, names, "voucherd_reservations_total")
	return names
}

// voucherdMetric matches the metric names of voucherd in a query.
var voucherdMetric = regexp.MustCompile(`\bvoucherd_[a-z0-9_]+\b`)

// checkQuery fails unless expr names at least one metric, and only metrics
// voucherd exports.
func checkQuery(t *testing.T, exported map[string]bool, where, expr string) {
	t.Helper()
	used := voucherdMetric.FindAllString(expr, -1)
	require.NotEmpty(t, used, "%s: the query names no voucherd metric: %s", where, expr)
	for _, name := range used {
		require.True(t, exported[name], "%s: voucherd exports no metric %s (query %s)", where, name, expr)
	}
}

// TestAlertRules: promtool accepts the rules file, each alert has a
// severity and a summary, and every query names metrics voucherd exports.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check %s and was not found (%v): apt-get install prometheus (or run scripts/deps.sh)", rulesFile, err)
	}
	out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput()
	require.NoError(t, err, "promtool check rules %s:\n%s", rulesFile, out)

	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	exported := exportedMetrics(t)
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: a rule that is no alert", g.Name)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "alert %s: severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], "alert %s: no summary", r.Alert)
			checkQuery(t, exported, "alert "+r.Alert, r.Expr)
			alerts[r.Alert] = true
		}
	}
	// What an operator must hear about.
	for _, metric := range []string{"voucherd_reconciliation_drift", "voucherd_consumer_lag_events", "voucherd_dead_letters_total",
		"voucherd_http_request_duration_seconds_count", "voucherd_http_request_duration_seconds_bucket"} {
		require.Contains(t, string(raw), metric, "no alert reads %s", metric)
	}
	require.GreaterOrEqual(t, len(alerts), 5)
}

// TestDashboardQueries: every panel of the Grafana dashboard queries
// metrics voucherd exports, panel ids are unique and panels do not overlap.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			GridPos struct {
				X, Y, W, H int
			} `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	exported := exportedMetrics(t)
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range dash.Panels {
		require.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			checkQuery(t, exported, "panel "+p.Title, target.Expr)
		}
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q is wider than the dashboard", p.Title)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				other, ok := taken[cell{x, y}]
				require.False(t, ok, "panels %q and %q overlap", p.Title, other)
				taken[cell{x, y}] = p.Title
			}
		}
	}
	// A flash sale and the service's health are on it.
	for _, want := range []string{"voucherd_refusals_total", "voucherd_rate_limited_total", "voucherd_keys_file_usable",
		"voucherd_dead_letters_total", "voucherd_reconciliation_drift"} {
		require.True(t, strings.Contains(string(raw), want), "the dashboard shows no %s", want)
	}
}
