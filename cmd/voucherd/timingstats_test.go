package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// quantile is the nearest-rank q-quantile of sorted x (not empty).
func quantile(x []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(x)))) - 1
	return x[max(0, min(i, len(x)-1))]
}

// sampleComparison compares two samples of latencies.
type sampleComparison struct {
	// ksD is the Kolmogorov-Smirnov statistic (the largest distance between
	// the two empirical distribution functions), ksP its asymptotic p-value.
	ksD, ksP float64
	// mwP is the two-sided p-value of the Mann-Whitney U test (normal
	// approximation, ties counted half).
	mwP float64
	// auc is U/(n·m): the probability that a value drawn from the first
	// sample exceeds one drawn from the second (0.5: neither is faster).
	auc float64
	// detectN is how many values of each a caller needs for a Mann-Whitney
	// test at 5% significance to tell the two apart with 80% power, if the
	// difference is auc's (Noether); +Inf when auc is 0.5.
	detectN float64
}

// compareSamples compares sorted samples a and b (neither empty).
func compareSamples(a, b []float64) sampleComparison {
	var c sampleComparison
	n, m := float64(len(a)), float64(len(b))
	// Kolmogorov-Smirnov: walk both sorted samples together.
	for i, j := 0, 0; i < len(a) && j < len(b); {
		v := min(a[i], b[j])
		for i < len(a) && a[i] == v {
			i++
		}
		for j < len(b) && b[j] == v {
			j++
		}
		c.ksD = max(c.ksD, math.Abs(float64(i)/n-float64(j)/m))
	}
	en := math.Sqrt(n * m / (n + m))
	lambda := (en + 0.12 + 0.11/en) * c.ksD
	for k := 1; k <= 100; k++ {
		c.ksP += 2 * math.Pow(-1, float64(k-1)) * math.Exp(-2*float64(k*k)*lambda*lambda)
	}
	c.ksP = min(1, max(0, c.ksP))
	if lambda < 0.2 {
		c.ksP = 1 // the series does not converge there; the distributions are indistinguishable
	}
	// Mann-Whitney: count the pairs where a's value is larger, ties half.
	var u float64
	for i, j, k := 0, 0, 0; i < len(a); i++ {
		for j < len(b) && b[j] < a[i] {
			j++
		}
		for k < len(b) && b[k] <= a[i] {
			k++
		}
		u += float64(j) + float64(k-j)/2
	}
	c.auc = u / (n * m)
	z := (u - n*m/2) / math.Sqrt(n*m*(n+m+1)/12)
	c.mwP = math.Erfc(math.Abs(z) / math.Sqrt2)
	const zz = (1.959964 + 0.841621) * (1.959964 + 0.841621)
	c.detectN = zz / (3 * (c.auc - 0.5) * (c.auc - 0.5)) / 2
	return c
}

// The statistics of BenchmarkCodeTiming: two samples of one distribution
// are not told apart, a shift of a sixth of the spread is, and the sample
// size said to be needed is about what theory says.
func TestCompareSamples(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, shift float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = 200 + shift + 30*rng.NormFloat64()
		}
		slices.Sort(x)
		return x
	}
	same := compareSamples(draw(5000, 0), draw(5000, 0))
	require.Greater(t, same.ksP, 0.01)
	require.Greater(t, same.mwP, 0.01)
	require.InDelta(t, 0.5, same.auc, 0.02)

	shifted := compareSamples(draw(5000, 5), draw(5000, 0))
	require.Less(t, shifted.ksP, 0.01)
	require.Less(t, shifted.mwP, 0.001)
	require.Greater(t, shifted.auc, 0.5)
	// A shift of 1/6 sd: AUC = Φ(1/(6√2)) ≈ 0.547, so about 600 of each.
	require.InDelta(t, 600, shifted.detectN, 350)

	require.Equal(t, 2.0, quantile([]float64{1, 2, 3, 4}, 0.5))
	require.Equal(t, 4.0, quantile([]float64{1, 2, 3, 4}, 0.99))
}
