package fleet

import (
	"strings"

	"github.com/google/uuid"
)

// derivedID is the UUID (version 5) of parts: the same parts give the same id.
// A batch's and a schedule's tasks and batches have such ids, so that making
// one again (retried, after a restart, by a new leader) finds the first.
func derivedID(parts ...string) string {
	return uuid.NewSHA1(idSpace, []byte(strings.Join(parts, "\x00"))).String()
}

// idSpace is the UUID namespace of derived ids.
var idSpace = uuid.MustParse("7c3c2a60-51b1-4f0e-9d8a-3f1e0c6b9a41")
