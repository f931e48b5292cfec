package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/voucherd/voucherd/internal/voucher"
)

func (s *Server) createVoucher(w http.ResponseWriter, r *http.Request) error {
	var body createVoucherRequest
	if err := decodeBody(r, func(b []byte) error { return body.decode(b, false) }); err != nil {
		return err
	}
	v, err := body.toVoucher()
	if err != nil {
		return err
	}
	created, err := s.svc.CreateVoucher(r.Context(), v)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/vouchers/"+created.Code)
	writeJSON(w, http.StatusCreated, withStacking(toVoucherJSON(created), created))
	return nil
}

func (s *Server) getVoucher(w http.ResponseWriter, r *http.Request) error {
	v, err := s.svc.Voucher(r.Context(), r.PathValue("code"))
	if err != nil {
		return err
	}
	out := toVoucherJSON(v)
	out.withWindows(v, s.svc.Config().Clock())
	writeJSON(w, http.StatusOK, withStacking(out, v))
	return nil
}

func (s *Server) patchVoucher(w http.ResponseWriter, r *http.Request) error {
	var body createVoucherRequest
	if err := decodeBody(r, func(b []byte) error { return body.decode(b, true) }); err != nil {
		return err
	}
	v, err := s.svc.PatchVoucher(r.Context(), r.PathValue("code"), body.toPatch())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, withStacking(toVoucherJSON(v), v))
	return nil
}

func (s *Server) warmup(w http.ResponseWriter, r *http.Request) error {
	code := r.PathValue("code")
	if !voucher.ValidCode(code) {
		return voucher.Errorf(voucher.CodeVoucherNotFound, "voucher %q not found", code)
	}
	res, err := s.svc.Warmup(r.Context(), code)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, warmupJSON{Code: code, InRedis: res.InGate, LoadedByThisCall: res.LoadedNow})
	return nil
}

// reconcile answers with a reconciliation report of a flash voucher: a dry
// run on GET, with the safe repairs applied on POST. An unknown voucher is
// answered by the pass's first read of the store's counters (one row), not
// by a read of the voucher with its live counts.
func (s *Server) reconcile(repair bool) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		code := r.PathValue("code")
		// A paced pass over a big voucher outlasts the server's write
		// timeout; the client's own timeout and hanging up still end it.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		rep, err := s.svc.Reconcile(r.Context(), code, repair, s.cfg.ReconcileGrace)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, rep)
		return nil
	}
}

func (s *Server) reserve(w http.ResponseWriter, r *http.Request) error {
	var body reserveRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	req, err := body.toDomain(r.PathValue("code"))
	if err != nil {
		return err
	}
	req.Requester = requester(w)
	res, err := s.svc.Reserve(r.Context(), req)
	if err != nil {
		return err
	}
	h := w.Header()
	if res.Replay {
		h["Idempotent-Replayed"] = replayedTrue
	}
	h["Content-Type"] = jsonContentType
	out := reservationJSON{
		OrderID: res.OrderID, DiscountAmount: res.DiscountAmount,
		Status: string(res.Status), ExpiresAt: res.ExpiresAt.UTC(), Clipped: res.Clipped,
	}
	w.WriteHeader(http.StatusCreated)
	bp := bodyPool.Get().(*[]byte)
	*bp = out.appendJSON((*bp)[:0])
	_, _ = w.Write(*bp) // copies: the buffer may go back to the pool
	putBody(bp)
	return nil
}

// validate answers what a reservation made now would answer, taking
// nothing: 200 with valid or the refusal's code and reason.
func (s *Server) validate(w http.ResponseWriter, r *http.Request) error {
	var body reserveRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	req, err := body.toValidation(r.PathValue("code"))
	if err != nil {
		return err
	}
	req.Requester = requester(w)
	v, err := s.svc.Validate(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toValidationJSON(v))
	return nil
}

// replayedTrue is the Idempotent-Replayed header's value, shared.
var replayedTrue = []string{"true"}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) error {
	red, err := s.svc.Redemption(r.Context(), r.PathValue("code"), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRedemptionJSON(red))
	return nil
}

func (s *Server) confirm(w http.ResponseWriter, r *http.Request) error {
	red, err := s.svc.Confirm(r.Context(), r.PathValue("code"), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRedemptionJSON(red))
	return nil
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) error {
	red, err := s.svc.Release(r.Context(), r.PathValue("code"), r.PathValue("orderId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRedemptionJSON(red))
	return nil
}

// extend pushes a RESERVED hold's expiry forward; see
// voucher.Service.Extend for the rules.
func (s *Server) extend(w http.ResponseWriter, r *http.Request) error {
	var body extendRequest
	if err := decodeBody(r, body.decode); err != nil {
		return err
	}
	d, err := body.duration()
	if err != nil {
		return err
	}
	red, err := s.svc.Extend(r.Context(), r.PathValue("code"), r.PathValue("orderId"), d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRedemptionJSON(red))
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if s.draining.Load() {
		return voucher.Errorf(voucher.CodeUnavailable, "draining")
	}
	check := s.cfg.Ready
	if check == nil {
		check = s.svc.Ping
	}
	if err := check(r.Context()); err != nil {
		// The answer names the dependency only: a raw error shows
		// addresses and versions to anyone who can reach the port. The
		// error is logged with the answer (writeError).
		msg := "not ready"
		var down *dependencyDown
		if errors.As(err, &down) {
			msg += ": " + down.name
		}
		return voucher.Unavailable(err, "%s", msg)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// DependencyDown marks err as the failure of the named dependency
// ("postgres", "redis", "kafka") for Config.Ready: /readyz answers
// "not ready: NAME" and only logs err.
func DependencyDown(name string, err error) error { return &dependencyDown{name: name, err: err} }

type dependencyDown struct {
	name string
	err  error
}

func (e *dependencyDown) Error() string { return e.name + ": " + e.err.Error() }
func (e *dependencyDown) Unwrap() error { return e.err }
