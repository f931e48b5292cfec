package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// children caches the children of one metric vector by their label values,
// so that an observation on the request path is a map read without locks
// or allocations instead of the vector's hash-and-lock look-up. The map is
// copied on each miss; label values come from small fixed vocabularies
// (routes, error codes, statuses, dependencies), so misses end early.
type children[K comparable, V any] struct {
	mu sync.Mutex // serialises misses
	m  atomic.Pointer[map[K]V]
}

// get returns the child of key, creating it with newChild on the first call.
func (c *children[K, V]) get(key K, newChild func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[key]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[key]; ok {
			return v
		}
	}
	next := map[K]V{}
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	v := newChild()
	next[key] = v
	c.m.Store(&next)
	return v
}

type requestKey struct {
	route, key, outcome string
	status              int
}

type modeOutcome struct{ mode, outcome string }

// reserveChildren are the children of Reservations and ReserveDuration
// for one mode and outcome.
type reserveChildren struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type depOp struct{ dep, op string }
