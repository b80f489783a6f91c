//go:build chiffonfaults

package core

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
)

// This file is compiled only with -tags chiffonfaults, for the reliability tests in
// tests/. CHIFFON_FAULTS lists probabilities, such as
// "drop_status=0.05,drop_result=0.05,dup_request=0.05": incoming work_status and
// work_result messages are dropped as if the network lost them, and outgoing
// work_requests are sent twice as if the network duplicated them.

var faultRates = parseFaultRates(os.Getenv("CHIFFON_FAULTS"))

func parseFaultRates(s string) map[string]float64 {
	rates := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if p, err := strconv.ParseFloat(v, 64); ok && err == nil {
			rates[k] = p
		}
	}
	return rates
}

func faultHit(name string) bool {
	p := faultRates[name]
	return p > 0 && rand.Float64() < p
}

// faultDropIncoming reports whether an incoming message of type typ is lost.
func faultDropIncoming(typ envelope.Type) bool {
	switch typ {
	case envelope.TypeWorkStatus:
		return faultHit("drop_status")
	case envelope.TypeWorkResult:
		return faultHit("drop_result")
	}
	return false
}

// faultDuplicateOutgoing reports whether an outgoing message of type typ is sent twice.
func faultDuplicateOutgoing(typ envelope.Type) bool {
	return typ == envelope.TypeWorkRequest && faultHit("dup_request")
}
