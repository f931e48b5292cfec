package redisgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// loadingTTL bounds how long a loader writing in steps keeps the voucher's
// loading key between two steps: one that dies frees it after this.
const loadingTTL = 10 * time.Second

// loadWaitPoll is how often a loader waiting for another one's turn asks
// again.
const loadWaitPoll = 10 * time.Millisecond

// Statuses of loadstep.lua.
const (
	loadStepDone   = 1
	loadStepLoaded = 0
	loadStepBusy   = 2
)

// errLoadBusy is returned when another loader is writing the voucher in
// steps, or this one lost its turn.
var errLoadBusy = errors.New("redisgate: another loader is writing the voucher")

// loadInSteps writes a snapshot with loadstep.lua: a begin (waiting, up to
// twice loadingTTL and while ctx lasts, for another loader's turn), then parts of
// at most Config.ScanCount customers and orders, then a finish that moves
// the hashes into place and sets remaining (and the money budget, budget as
// load.lua takes it). users and orders are flat
// field, value lists. It returns 1 when it loaded the voucher, 0 when the
// voucher was loaded already (by another loader).
func (g *Gate) loadInSteps(ctx context.Context, client rueidis.Client, k keys, expireAt, remaining string,
	held int64, budget []string, users, orders []string) (int64, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	token := hex.EncodeToString(b[:])
	ttl := strconv.FormatInt(loadingTTL.Milliseconds(), 10)
	keys := k.loadStep()
	step := func(args ...string) (int64, error) {
		ctx, cancel := g.withTimeout(ctx)
		defer cancel()
		n, err := loadStepScript.Exec(ctx, client, keys, args).AsInt64()
		if err == nil && n == loadStepBusy {
			err = errLoadBusy
		}
		return n, err
	}
	// Another loader's turn ends when it finishes (loaded: nothing to
	// write) or its loading key expires.
	wait := time.Now().Add(2 * loadingTTL)
	for {
		n, err := step("begin", token, expireAt, ttl)
		if errors.Is(err, errLoadBusy) && time.Now().Before(wait) {
			select {
			case <-ctx.Done():
				return 0, err
			case <-time.After(loadWaitPoll):
			}
			continue
		}
		if err != nil || n == loadStepLoaded {
			return 0, err
		}
		break
	}
	per := 2 * g.cfg.ScanCount
	for len(users)+len(orders) > 0 {
		nu := min(len(users), per)
		no := min(len(orders), per-nu)
		args := make([]string, 0, 5+nu+no)
		args = append(args, "part", token, expireAt, ttl, strconv.Itoa(nu/2))
		args = append(append(args, users[:nu]...), orders[:no]...)
		users, orders = users[nu:], orders[no:]
		if n, err := step(args...); err != nil || n == loadStepLoaded {
			return 0, err
		}
	}
	return step("finish", token, expireAt, ttl, remaining, strconv.FormatInt(held, 10), budget[0], budget[1], budget[2])
}
