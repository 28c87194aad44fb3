package psp

import (
	"net/http"
	"strings"
	"time"
)

// POST /transfer/finalize_transfer {transfer_code, otp}: Paystack's second
// step of a transfer that waits for the OTP sent to the business (status
// "otp", the otp_for fault). The right OTP (FinalizeOTP) moves it to
// "pending", after which it settles after the settle delay like any
// transfer; a wrong one, or a transfer not waiting for an OTP, is refused
// and changes nothing. Infrastructure faults apply as to POST /transfer,
// and an Idempotency-Key is honoured the same way.

// FinalizeOTP is the OTP the stand-in's business receives for every
// transfer.
const FinalizeOTP = "123456"

type paystackFinalizeReq struct {
	TransferCode string `json:"transfer_code"`
	OTP          string `json:"otp"`
}

func (s *Server) handlePaystackFinalize(w http.ResponseWriter, r *http.Request) {
	var req paystackFinalizeReq
	st, call, key, ok := s.beginPaystackJSON(w, r, &req)
	if !ok {
		return
	}
	idem := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	op := createOp{
		provider:    ProviderPaystack,
		d:           paystackDialect{},
		st:          st,
		call:        call,
		idemKey:     idem,
		idemScope:   strings.Join([]string{string(ProviderPaystack), key, idem}, "\x00"),
		fingerprint: "POST /transfer/finalize_transfer\x00" + req.TransferCode + "\x00" + req.OTP,
	}
	op.exec = func(st *state, _ func() FaultKind) response {
		invalid := func(msg string) response {
			return response{status: http.StatusBadRequest, body: paystackErr(msg, "invalid_params"), outcome: OutcomeInvalid}
		}
		switch {
		case req.TransferCode == "":
			return invalid("Transfer code is required")
		case req.OTP == "":
			return invalid("OTP is required")
		}
		o := st.byID[req.TransferCode]
		if o == nil || o.paystack == nil || o.paystack.Integration != integrationID(key) {
			return response{status: http.StatusNotFound, body: paystackErr("Transfer not found", ""), outcome: OutcomeNotFound}
		}
		call.PayoutID = o.rec.PayoutID // s.mu is held
		t := o.paystack
		switch {
		case t.Status != "otp":
			return response{status: http.StatusBadRequest, body: paystackErr("Transfer is not currently awaiting OTP", ""),
				outcome: OutcomeRejected, objectID: o.rec.ID}
		case req.OTP != FinalizeOTP:
			return response{status: http.StatusBadRequest, body: paystackErr("Invalid OTP", ""), outcome: OutcomeRejected, objectID: o.rec.ID}
		}
		now := time.Now()
		t.Status, o.rec.Status, t.UpdatedAt = "pending", "pending", paystackTime(now)
		if s.cfg.SettleDelay > 0 {
			st.schedule(&task{due: now.Add(s.cfg.SettleDelay), settleID: o.rec.ID})
			s.nudge()
		}
		return response{status: http.StatusOK, body: paystackOK("Transfer has been queued", t), outcome: OutcomeOK, objectID: o.rec.ID}
	}
	s.runCreate(w, r, op)
}
