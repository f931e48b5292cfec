package benchcmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stageHist is one dependency call's latency histogram at a moment.
type stageHist struct {
	count  uint64
	sum    float64
	bounds []float64
	cum    []uint64
}

// stages reads the dependency histograms of servers from their /metrics
// and sums them, keyed "dependency\top". A server that does not answer
// counts as none.
func stages(ctx context.Context, urls []string) map[string]stageHist {
	out := map[string]stageHist{}
	for _, u := range urls {
		families, err := scrape(ctx, u+"/metrics")
		if err != nil {
			continue
		}
		fam := families["voucherd_dependency_duration_seconds"]
		if fam == nil {
			continue
		}
		for _, d := range fam.Metric {
			if d.Histogram == nil {
				continue
			}
			labels := map[string]string{}
			for _, l := range d.Label {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["dependency"] + "\t" + labels["op"]
			h := out[key]
			h.count += d.Histogram.GetSampleCount()
			h.sum += d.Histogram.GetSampleSum()
			for i, bk := range d.Histogram.Bucket {
				if i < len(h.cum) {
					h.cum[i] += bk.GetCumulativeCount()
					continue
				}
				h.bounds = append(h.bounds, bk.GetUpperBound())
				h.cum = append(h.cum, bk.GetCumulativeCount())
			}
			out[key] = h
		}
	}
	return out
}

// scrape reads a Prometheus text exposition.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// writeStages prints the dependency calls a server made since the snapshot
// before: how many, their mean and their p99 (the upper bound of the
// histogram bucket it falls in), that is where its requests spent their time
// outside its own code.
func writeStages(w io.Writer, name string, before, after map[string]stageHist) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "stages of %s (dependency calls during the measured runs)\n", name)
	fmt.Fprintln(tw, "dependency\top\tcalls\tmean\tp99 <=")
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, b := after[k], before[k]
		n := a.count - b.count
		if n == 0 {
			continue
		}
		p99 := "inf"
		for i, bound := range a.bounds {
			c := a.cum[i]
			if i < len(b.cum) {
				c -= b.cum[i]
			}
			if float64(c) >= 0.99*float64(n) {
				p99 = fmt.Sprintf("%.1fms", bound*1000)
				break
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2fms\t%s\n", k, n, (a.sum-b.sum)/float64(n)*1000, p99)
	}
	_ = tw.Flush()
}
