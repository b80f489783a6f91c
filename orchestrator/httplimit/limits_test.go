package httplimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/httplimit"
)

func TestWithDefaultsFillsOnlyTheFieldsLeftZero(t *testing.T) {
	want := httplimit.Limits{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 60 * time.Second, MaxConnections: 1024,
		MaxStreamsPerToken: 128, MaxStreams: 512}
	if got := (httplimit.Limits{}).WithDefaults(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	got := httplimit.Limits{ReadTimeout: time.Second, MaxStreams: 3}.WithDefaults()
	if got.ReadTimeout != time.Second || got.MaxStreams != 3 || got.IdleTimeout != 60*time.Second {
		t.Fatalf("with two set: %+v", got)
	}
}

func TestValidateNamesTheNegativeKey(t *testing.T) {
	cases := map[string]httplimit.Limits{
		"http.limits.read_header_timeout":   {ReadHeaderTimeout: -time.Second},
		"http.limits.read_timeout":          {ReadTimeout: -time.Second},
		"http.limits.write_timeout":         {WriteTimeout: -time.Second},
		"http.limits.idle_timeout":          {IdleTimeout: -time.Second},
		"http.limits.max_connections":       {MaxConnections: -1},
		"http.limits.max_streams_per_token": {MaxStreamsPerToken: -1},
		"http.limits.max_streams":           {MaxStreams: -1},
	}
	for key, l := range cases {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), key+":") {
			t.Errorf("%s negative: %v", key, err)
		}
	}
	if err := (httplimit.Limits{}).Validate(); err != nil {
		t.Fatalf("zero limits: %v", err)
	}
}
