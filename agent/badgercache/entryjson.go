package badgercache

import (
	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/jsonw"
)

// Cache entries are written by hand: encoding/json spent most of its time on
// reflection and on time.Time, whose MarshalJSON output it validates again. The bytes
// are those of encoding/json with HTML escaping off, as the orchestrator stores its
// records and the envelope travels: output text such as "<200>" is kept as written.
// Entries written earlier by json.Marshal, with \u003c escapes, decode alike.
// entryjson_test.go fills every field of dedupe.Entry by reflection and compares, so a
// field added to it and missed here fails.

// encodeEntry returns e as the cache stores it. A value the hand-written path cannot
// write (a year outside 0-9999, a free-form value encoding/json refuses) goes to
// encoding/json, which writes it or reports its own error.
func encodeEntry(e *dedupe.Entry) ([]byte, error) {
	w := entryWriter{jsonw.Writer{Buf: make([]byte, 0, entrySize(e))}}
	w.entry(e)
	if !w.Failed {
		return w.Buf, nil
	}
	return jsonw.AppendValue(nil, e)
}

// entryWriter appends a cache entry.
type entryWriter struct{ jsonw.Writer }

func (w *entryWriter) entry(e *dedupe.Entry) {
	w.Raw(`{"state":`)
	w.String(e.State)
	w.Raw(`,"task_id":`)
	w.String(e.TaskID)
	w.Raw(`,"work_type":`)
	w.String(e.WorkType)
	w.Raw(`,"started_at":`)
	w.Time(e.StartedAt)
	if e.Result != nil {
		w.Raw(`,"result":`)
		var err error
		if w.Buf, err = envelope.AppendPayload(w.Buf, e.Result); err != nil {
			w.Failed = true
		}
	}
	if len(e.ResultFields) > 0 {
		w.Raw(`,"result_fields":`)
		w.Value(e.ResultFields)
	}
	w.Raw(`,"output_len":`)
	w.Int(e.OutputLen)
	w.Raw(`,"output_pieces":`)
	w.Int(int64(e.OutputPieces))
	w.Raw("}")
}

// entryFixed and resultFixed are the widest fixed parts (member names, numbers, the
// time) of an entry and of its result; entrySize adds the text and free-form values as
// jsonw guesses them.
const (
	entryFixed = len(`{"state":"","task_id":"","work_type":"","started_at":,"result_fields":,"output_len":,`+
		`"output_pieces":}`) + 2*jsonw.IntSize + jsonw.TimeSize
	resultFixed = len(`,"result":{"task_id":"","status":"","exit_code":,"output":"",`+
		`"resources_used":{"duration_seconds":,"gpu_vram_mb":,"cpu_time_ms":}}`) + 4*jsonw.IntSize
)

func entrySize(e *dedupe.Entry) int {
	n := entryFixed
	text := len(e.State) + len(e.TaskID) + len(e.WorkType)
	if r := e.Result; r != nil {
		n += resultFixed
		text += len(r.TaskID) + len(r.Status) + len(r.Output)
	}
	if len(e.ResultFields) > 0 {
		n += jsonw.ValueSize(e.ResultFields)
	}
	return n + jsonw.TextSize(text)
}
