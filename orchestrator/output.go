package orchestrator

import (
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// placeOutput places a work_status's output in the task's whole output (see
// output.Assembler) and returns the offset used and the piece, to be written with the
// status (without data when the status carried no output). Called with o.mu held.
func (o *Orchestrator) placeOutput(r *run, env *envelope.Envelope, st *envelope.WorkStatus) (*int64, task.Piece, error) {
	off, ok, err := r.out.Place(env.XCustomFields, st)
	if !ok || err != nil {
		return nil, task.Piece{}, err
	}
	r.t.OutputBytes = r.out.Contiguous()
	return &off, task.Piece{Offset: off, Data: st.Step.Output}, nil
}
