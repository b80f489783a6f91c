package orchestrator

import (
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/dgraph-io/badger/v4"
)

// placeOutput places a work_status's output in the task's whole output (see
// output.Assembler) and returns the offset used and the store entry of the piece, to
// be written with the status (nil when the status carried no output). Called with
// o.mu held.
func (o *Orchestrator) placeOutput(r *run, env *envelope.Envelope, st *envelope.WorkStatus) (*int64, *badger.Entry, error) {
	off, ok, err := r.out.Place(env.XCustomFields, st)
	if !ok || err != nil {
		return nil, nil, err
	}
	r.t.OutputBytes = r.out.Contiguous()
	return &off, o.st.outputEntry(r.t.ID, off, st.Step.Output), nil
}
