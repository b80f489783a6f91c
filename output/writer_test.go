package output_test

import (
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/output"
)

// TestStatusesCutAPieceJustOverTheHalfSize: a flush a few bytes over half a chunk
// that does not fit one message whole is cut at half a chunk; the last few bytes go
// in a piece of their own (this panicked, slicing past the end).
func TestStatusesCutAPieceJustOverTheHalfSize(t *testing.T) {
	req := envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", WorkType: "run"})
	ws := envelope.WorkStatus{TaskID: "6f1c2a4e-9b3d-4c1e-8a2f-0d9e8c7b6a51", Status: envelope.StatusRunning}
	data := strings.Repeat("\x01", envelope.MaxChunkSize/2+1) // escapes to six bytes each
	var sizes []int
	output.Statuses(req, ws, output.Batch{Data: data, Total: int64(len(data))}, 512<<10, func(enc []byte) {
		env, err := envelope.Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(env.Payload.(*envelope.WorkStatus).Step.Output))
	})
	if len(sizes) != 3 || sizes[0]+sizes[1]+sizes[2] != len(data) || sizes[2] != 1 {
		t.Fatalf("pieces of %v bytes, want three of %d in all, the last of 1", sizes, len(data))
	}
}
