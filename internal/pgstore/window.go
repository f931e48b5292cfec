package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/voucherd/voucherd/internal/voucher"
)

var (
	qVoucherWindows     = mustQuery("voucher_windows")
	qVoucherWindowsSet  = mustQuery("voucher_windows_set")
	qVoucherWindowsLock = mustQuery("voucher_windows_lock")
	qVoucherWindowsCap  = mustQuery("voucher_windows_cap")
)

// scheduleJSON is a schedule as stored in voucher.schedule (NULL: none).
func scheduleJSON(s *voucher.Schedule) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	return json.Marshal(s)
}

// parseSchedule reads voucher.schedule.
func parseSchedule(b []byte) (*voucher.Schedule, error) {
	if b == nil {
		return nil, nil
	}
	var s voucher.Schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("pgstore: voucher.schedule: %w", err)
	}
	return &s, nil
}

// insertWindows writes the windows of voucher v, created in tx.
func insertWindows(ctx context.Context, tx pgx.Tx, v voucher.Voucher) error {
	if v.Schedule == nil {
		return nil
	}
	b, err := scheduleJSON(v.Schedule)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, qVoucherWindowsSet, v.Code, b, v.WindowLimit)
	return err
}

// windowColumns are the columns of a voucher's windows as voucher_get and
// voucher_windows read them: the schedule, and the latest occurrence's
// counter (start NULL: none).
type windowColumns struct {
	schedule []byte
	start    *time.Time
	held     int32
}

// fill sets v's Schedule and LatestWindow from w.
func (w windowColumns) fill(v *voucher.Voucher) error {
	s, err := parseSchedule(w.schedule)
	if err != nil {
		return err
	}
	v.Schedule = s
	v.LatestWindow = voucher.WindowCount{}
	if w.start != nil {
		v.LatestWindow = voucher.WindowCount{Start: w.start.UTC(), Held: w.held}
	}
	return nil
}

// readWindows fills v's Schedule, WindowLimit and LatestWindow.
func readWindows(ctx context.Context, q rowQuerier, v *voucher.Voucher) error {
	var w windowColumns
	if err := q.QueryRow(ctx, qVoucherWindows, v.Code).Scan(&w.schedule, &v.WindowLimit, &w.start, &w.held); err != nil {
		return err
	}
	return w.fill(v)
}

// lockWindows locks the counters of voucher code's occurrences, before the
// voucher row, when p changes the quota, and returns what each holds.
func lockWindows(ctx context.Context, tx pgx.Tx, code string, p voucher.Patch) (map[time.Time]int64, error) {
	if p.WindowLimit == nil {
		return nil, nil
	}
	rows, err := tx.Query(ctx, qVoucherWindowsLock, code)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[time.Time]int64{}
	for rows.Next() {
		var start time.Time
		var n int64
		if err := rows.Scan(&start, &n); err != nil {
			return nil, err
		}
		held[start.UTC()] = n
	}
	return held, rows.Err()
}

// patchWindows writes the windows and quota of next, the patched voucher:
// a quota below what the occurrence covering p.Now holds is refused with
// CodeLimitBelowHeld (its counter locked by lockWindows).
func patchWindows(ctx context.Context, tx pgx.Tx, next voucher.Voucher, p voucher.Patch, held map[time.Time]int64) error {
	if p.Schedule == nil && p.WindowLimit == nil {
		return nil
	}
	if p.WindowLimit != nil {
		if o := next.Occurrence(p.Now); !o.Zero() && int64(*p.WindowLimit) < held[o.Start.UTC()] {
			e := voucher.Errorf(voucher.CodeLimitBelowHeld,
				"windowLimit %d is below the %d uses the current window of voucher %s holds",
				*p.WindowLimit, held[o.Start.UTC()], next.Code)
			e.Limit = voucher.LimitWindow
			return e
		}
		if _, err := tx.Exec(ctx, qVoucherWindowsCap, next.Code, *p.WindowLimit); err != nil {
			return err
		}
	}
	b, err := scheduleJSON(next.Schedule)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, qVoucherWindowsSet, next.Code, b, next.WindowLimit)
	return err
}
