package voucher

import (
	"context"
	"time"
)

// Store is the source of truth (PostgreSQL). Every method is one transaction;
// adapters translate driver errors into *Error values (CodeUnavailable for a
// dependency failure, the contract codes for rule violations). The port has
// no optional parts: every capability the service uses is a method here, so
// a fake that satisfies it walks the branches production walks.
type Store interface {
	// ResolveCode reads the voucher code names, else the budget of the
	// campaign code belongs to (either without live counts), whether a
	// RESERVED or CONFIRMED redemption holds the code, and the redemption
	// of orderID whatever its voucher ("" reads none), in one round trip
	// that costs the same whether the code exists or not, so that the
	// answer to an unknown code takes as long as the refusal of a known
	// one (docs/guessing.md, "Timing"). A code that names nothing is Found
	// false, not an error.
	ResolveCode(ctx context.Context, code, orderID string) (Resolution, error)
	// CreateVoucher inserts a voucher; CodeVoucherExists when the code is taken.
	CreateVoucher(ctx context.Context, v Voucher) (Voucher, error)
	// Voucher returns a voucher with live Reserved and Confirmed counts and
	// its stacking setting.
	Voucher(ctx context.Context, code string) (Voucher, error)
	// VoucherDefinition returns what Voucher does but the live counts
	// (Reserved, Confirmed and the budget's Reserved and Confirmed are 0),
	// at a cost that does not grow with the voucher's redemptions: the
	// definition cache re-reads with it on the reservation path.
	VoucherDefinition(ctx context.Context, code string) (Voucher, error)
	// PatchVoucher applies p atomically and returns the voucher before and
	// after the change (the gate adjusts remaining by the exact difference);
	// CodeLimitBelowHeld when a limit would drop below what is held.
	PatchVoucher(ctx context.Context, code string, p Patch) (before, after Voucher, err error)

	// Reserve takes one use in one transaction: the conditional counter
	// update, the per-customer counter and the redemption row. A known orderId
	// with the same code and customer is a replay; it takes nothing.
	Reserve(ctx context.Context, r ReserveRequest, now time.Time, ttl time.Duration) (Reservation, error)
	// Validate answers what Reserve of the same request at now would
	// answer, writing nothing: the same refusal errors, or what the use
	// would be. An empty OrderID skips the orderId checks.
	Validate(ctx context.Context, r ValidateRequest, now time.Time) (StoreValidation, error)
	// Redemption returns one redemption; CodeReservationNotFound when absent.
	Redemption(ctx context.Context, code, orderID string) (Redemption, error)
	// Order returns the redemption of an orderId whatever its voucher,
	// with HeldSince; CodeReservationNotFound when the orderId is unknown.
	Order(ctx context.Context, orderID string) (Redemption, error)
	// AbandonOrder fences a gate hold of code whose write has not reached
	// the store (a Kafka event, or a flash-sync write of unknown outcome or
	// of a dead instance): a RELEASED row for h.OrderID, which takes no
	// use, unless the orderId has a row already (a write of it still in
	// progress is waited for). It returns the orderId's row and whether
	// this call inserted it; a write of the order arriving later changes
	// nothing. For a replacement's hold (h.Replaces), when it inserts the
	// row it also releases the replaced order if that is still the
	// customer's RESERVED hold, in the same transaction: the gate marked
	// it released when it let the replacement through.
	AbandonOrder(ctx context.Context, code string, h Hold, now time.Time) (Redemption, bool, error)
	// Confirm moves RESERVED to CONFIRMED; idempotent for CONFIRMED;
	// CodeReservationReleased when released or expired.
	Confirm(ctx context.Context, code, orderID string, now time.Time) (Redemption, error)
	// Release moves a held redemption to RELEASED and gives its use back to the
	// voucher and the customer; idempotent. released is true when this call
	// released it.
	Release(ctx context.Context, code, orderID string, now time.Time) (r Redemption, released bool, err error)
	// ExpireDue releases up to limit RESERVED redemptions whose expiry is at
	// or before now, returning those it released. Concurrent callers release
	// each row once.
	ExpireDue(ctx context.Context, now time.Time, limit int) ([]Redemption, error)
	// Extend moves the expiry of a RESERVED redemption to until, never
	// earlier than it is and never later than its creation plus maxHold,
	// under the row lock that the expiry sweep also takes. A RESERVED one
	// past its expiry is released right here, as Confirm does, and answered
	// CodeReservationReleased; a released one is CodeReservationReleased, a
	// confirmed one CodeReservationConfirmed.
	Extend(ctx context.Context, code, orderID string, until, now time.Time, maxHold time.Duration) (Redemption, error)
	// Holds reads what holds a voucher's uses, for the HELD_OUT answer of
	// the flash paths (the standard path decides it inside Reserve).
	Holds(ctx context.Context, code string) (HoldSummary, error)

	// ApplyReserved writes reservations decided by the gate (Kafka mode)
	// idempotently: a known orderId changes nothing. It returns one result per
	// event, in order.
	ApplyReserved(ctx context.Context, events []ReservedEvent) ([]ApplyResult, error)
	// GateSnapshot reads what the gate needs to load a voucher, in one
	// consistent snapshot.
	GateSnapshot(ctx context.Context, code string) (Snapshot, error)
	// FlashVouchers lists the codes of flash vouchers whose window has not
	// ended before since (reconciliation walks them).
	FlashVouchers(ctx context.Context, since time.Time) ([]string, error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error

	StackStore
	ReconcileStore

	CampaignStore
	AdminStore
}

// Resolution is what Store.ResolveCode read, in one snapshot.
type Resolution struct {
	// Voucher is the voucher the code names, or with ByCampaign its
	// campaign's budget, without live counts (Reserved and Confirmed are
	// zero); valid when Found.
	Voucher    Voucher
	Found      bool
	ByCampaign bool
	// CodeHeld: a RESERVED or CONFIRMED redemption holds the code.
	CodeHeld bool
	// Order is the orderId's redemption (a campaign one with its campaign
	// code as VoucherCode), valid when HasOrder.
	Order    Redemption
	HasOrder bool
}

// HoldSummary says what holds a voucher's uses, as the store sees them.
type HoldSummary struct {
	TotalLimit int32
	// UsedCount is the voucher row's count of held uses.
	UsedCount int32
	// EarliestExpiry is the expiry of the voucher's RESERVED redemption
	// that expires first; zero when none is RESERVED.
	EarliestExpiry time.Time
}

// ReconcileStore is the store's part of reconciliation: a voucher's
// counters in one read, and its redemptions in bounded chunks, so that
// reconciling a voucher of a million holds costs memory for one chunk
// (docs/rules.md, "Reconciliation reads in chunks").
type ReconcileStore interface {
	// ReconcileCounts reads, in one statement, a voucher's total limit,
	// its count of held uses (used_count) and the counters of its limits:
	// the money budget's amount and held discounts, and each occurrence's
	// held uses. CodeVoucherNotFound when the voucher does not exist.
	ReconcileCounts(ctx context.Context, code string) (StoreCounts, error)
	// RedemptionsAmong returns the redemptions of code among orderIDs, in
	// any status (one indexed read); an orderId without a row of code is
	// absent from the answer. A campaign's redemption answers with the
	// campaign code it was made with as VoucherCode.
	RedemptionsAmong(ctx context.Context, code string, orderIDs []string) ([]Redemption, error)
	// HeldPage returns up to limit redemptions of code in status st
	// (StatusReserved or StatusConfirmed), ordered by (CreatedAt,
	// OrderID), after the key after (the zero key: from the first), as
	// RedemptionsAmong answers them. Pages are separate reads: a row that
	// keeps its status for the whole walk is returned once, one that
	// changes status meanwhile may be missed.
	HeldPage(ctx context.Context, code string, st Status, after PageKey, limit int) ([]Redemption, error)
	// StampCounters returns what CountersMarker answers for code for as
	// long as nobody writes or locks its voucher row, nor writes its money
	// budget's counter row, afterwards: "" when that cannot be made sure
	// now (the voucher row is locked by a writer), which equals no marker.
	// Every write that gives a redemption a use or takes it back locks or
	// writes the voucher row in its transaction (a redemption's insert
	// through its foreign key, the used_count update, a replacement's
	// lock), so CountersMarker answering a stamp taken earlier means no
	// such write committed in between. Confirmations lock only their
	// redemption. One momentary lock of the voucher row, never waited for.
	StampCounters(ctx context.Context, code string) (string, error)
	// CountersMarker identifies the versions of code's voucher row and
	// money budget's counter row and the voucher row's last locker, now
	// (primary-key reads, no lock).
	CountersMarker(ctx context.Context, code string) (string, error)
}

// PageKey is where HeldPage continues: the last row of the page before.
type PageKey struct {
	CreatedAt time.Time
	OrderID   string
}

// StoreCounts is what ReconcileCounts reads of a voucher, at one instant.
type StoreCounts struct {
	TotalLimit int32
	// Held is the voucher's count of held uses (used_count, which the
	// store keeps equal to its RESERVED and CONFIRMED rows).
	Held int32
	// BudgetAmount and BudgetHeld are the money budget's counter (0 and 0
	// without a budget): its amount and the discounts of the held rows.
	BudgetAmount, BudgetHeld int64
	// Windows maps the start of each occurrence whose counter holds uses
	// to how many; nil when none.
	Windows map[time.Time]int64
}

// Snapshot is a voucher's state as the gate loads it: remaining is
// TotalLimit minus held, never TotalLimit alone.
type Snapshot struct {
	Voucher Voucher
	// Held is the number of held redemptions (RESERVED + CONFIRMED).
	Held int32
	// Customers maps each customer with held uses to their count.
	Customers map[string]int32
	// Orders lists every known orderId of the voucher, held or released.
	Orders []Redemption
}

// Remaining is TotalLimit minus held.
func (s Snapshot) Remaining() int64 { return int64(s.Voucher.TotalLimit) - int64(s.Held) }

// StackStore is the store's part of orders that present several codes
// (docs/stacks.md). Each method is one transaction that acts on every
// code of the order, all or none.
type StackStore interface {
	// ReserveStack takes one use of each code of r (r.Customers set) for
	// r.OrderID, through the store's per-code reservation, in the order
	// of r.Codes, each on what the earlier discounts left of the order
	// amount: all or none. A refusal is the refused code's error with
	// FailedCode set. A known stack of the same customer and codes is a
	// replay; any other known orderId is ORDER_CONFLICT (ORDER_RELEASED
	// when it was released).
	ReserveStack(ctx context.Context, r StackRequest, now time.Time, ttl time.Duration) (Stack, error)
	// Stack reads the stack of orderID; CodeReservationNotFound when
	// orderID is no stack.
	Stack(ctx context.Context, orderID string) (Stack, error)
	// StackOf reports the stack orderID is or belongs to (as a member's
	// redemption).
	StackOf(ctx context.Context, orderID string) (stack string, found bool, err error)
	// StacksOf lists the stacks that some of orderIDs are members of.
	StacksOf(ctx context.Context, orderIDs []string) ([]string, error)
	// ConfirmStack confirms every member (Confirm's rules); a refusal of
	// one confirms none.
	ConfirmStack(ctx context.Context, orderID string, now time.Time) (Stack, error)
	// ReleaseStack releases every held member (Release's rules).
	ReleaseStack(ctx context.Context, orderID string, now time.Time) (Stack, error)
	// VoucherStacking reads a voucher's stacking setting (zero: not
	// stackable).
	VoucherStacking(ctx context.Context, code string) (Stacking, error)
	// ExtendStack extends every member (Extend's rules); a refusal of one
	// extends none.
	ExtendStack(ctx context.Context, orderID string, until, now time.Time, maxHold time.Duration) (Stack, error)
}
