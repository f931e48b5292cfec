package voucher

import (
	"context"
	"time"
)

// warmupLockTTL bounds how long one loader holds a voucher's warm-up lock
// in the gate: a loader that dies frees the lock after it.
const warmupLockTTL = 10 * time.Second

// warmupPoll is how often waitLoaded asks the gate whether another
// loader has finished.
const warmupPoll = 10 * time.Millisecond

// WarmupResult says where a flash voucher stands after Warmup.
type WarmupResult struct {
	// InGate reports that the voucher is loaded in the gate now. It is
	// false only when another loader held the lock and had not finished
	// within ServiceConfig.WarmupWait: call again.
	InGate bool
	// LoadedNow reports that this call wrote the gate (false: the voucher
	// was there already, or another loader wrote it).
	LoadedNow bool
}

// loader loads flash vouchers into the gate from store snapshots.
type loader struct {
	*deps
	catalog *catalog
	writes  flashWrites
}

// Warmup loads a flash voucher into the gate from a store snapshot, once:
// one loader at a time across instances, the others wait for it. In Kafka
// mode it refuses while the consumer has not caught up, since events still
// in Kafka are missing from the snapshot.
func (s *Service) Warmup(ctx context.Context, code string) (WarmupResult, error) {
	if s.gate == nil {
		return WarmupResult{}, Unavailable(nil, "Redis is not configured")
	}
	return s.loader.warmup(ctx, code)
}

// warmup is Warmup.
func (l *loader) warmup(ctx context.Context, code string) (WarmupResult, error) {
	v, err := l.catalog.voucher(ctx, code)
	if err != nil {
		return WarmupResult{}, err
	}
	if !v.FlashSale {
		return WarmupResult{}, Errorf(CodeNotFlashSale, "voucher %s is not a flash-sale voucher", code)
	}
	if ok, err := l.gate.Loaded(ctx, code); err != nil || ok {
		return WarmupResult{InGate: ok}, err
	}
	unlock, ok, err := l.gate.Lock(ctx, code, warmupLockTTL)
	if err != nil {
		return WarmupResult{}, err
	}
	if !ok {
		loaded, err := l.waitLoaded(ctx, code)
		return WarmupResult{InGate: loaded}, err
	}
	defer unlock()
	if err := l.writes.caughtUp(ctx); err != nil {
		return WarmupResult{}, err
	}
	snap, err := l.store.GateSnapshot(ctx, code)
	if err != nil {
		return WarmupResult{}, err
	}
	// Load writes nothing when the voucher is there already; either way it
	// is in the gate once Load succeeds.
	wrote, err := l.gate.Load(ctx, snap)
	if err != nil {
		return WarmupResult{}, err
	}
	return WarmupResult{InGate: true, LoadedNow: wrote}, nil
}

// waitLoaded waits up to WarmupWait for another loader and reports whether
// the voucher is in the gate.
func (l *loader) waitLoaded(ctx context.Context, code string) (bool, error) {
	deadline := l.now().Add(l.cfg.WarmupWait)
	for l.now().Before(deadline) {
		if err := sleepCtx(ctx, warmupPoll); err != nil {
			return false, Unavailable(err, "waiting for voucher %s to load", code)
		}
		if ok, err := l.gate.Loaded(ctx, code); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
