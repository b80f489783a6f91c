//go:build !chiffonfaults

package core

import "github.com/chiffon-dev/chiffon/envelope"

// Production builds inject no faults; see faulthook_on.go.

func faultDropIncoming(envelope.Type) bool { return false }

func faultDuplicateOutgoing(envelope.Type) bool { return false }
