package jsonwtest_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/internal/jsonw/jsonwtest"
)

type inner struct {
	N int8
	T time.Time
}

// everyKind has a field of every kind Fill handles.
type everyKind struct {
	S      string
	B      bool
	I      int
	I16    int16
	U8     uint8
	U      uint64
	F      float32
	T      time.Time
	PT     *time.Time
	Num    json.Number
	Raw    json.RawMessage
	In     inner
	P      *inner
	Sl     []inner
	Arr    [2]string
	M      map[string]int64
	Any    any
	Free   map[string]any
	hidden string
}

func TestFillReachesEveryExportedField(t *testing.T) {
	// Over many fills, every exported field must be set to something other than its
	// zero value at least once, so that an encoder missing a field is caught.
	g := jsonwtest.New(1, 1)
	typ := reflect.TypeFor[everyKind]()
	set := make([]bool, typ.NumField())
	for range 200 {
		var v everyKind
		g.Fill(&v)
		if v.hidden != "" {
			t.Fatal("Fill set an unexported field")
		}
		rv := reflect.ValueOf(v)
		for i := range set {
			if typ.Field(i).IsExported() && !rv.Field(i).IsZero() {
				set[i] = true
			}
		}
	}
	for i, ok := range set {
		if typ.Field(i).IsExported() && !ok {
			t.Errorf("field %s never set", typ.Field(i).Name)
		}
	}
}
