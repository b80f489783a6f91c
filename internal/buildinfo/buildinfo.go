// Package buildinfo says what the running binary was built from, for `chiffon
// version` and the daemons' build_info metrics.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Info is what a binary knows of its build: the module version, and the VCS
// revision and commit time when it was built from a checkout.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read is the running binary's Info.
func Read() Info { return From(debug.ReadBuildInfo) }

// From is the Info that read returns; a binary without build info (rare: built
// without module support) says "unknown".
func From(read func() (*debug.BuildInfo, bool)) Info {
	b := Info{Version: "unknown", GoVersion: runtime.Version()}
	bi, ok := read()
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `chiffon version` prints after the program's name.
func (b Info) String() string {
	s := b.Version
	if b.Revision != "" {
		s += " (" + b.Revision
		if b.Time != "" {
			s += " " + b.Time
		}
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + b.GoVersion
}

// Gauge is a build_info metric named name: always 1, labelled with the running
// binary's version, VCS revision ("unknown" when the build did not say) and Go
// version.
func Gauge(name string) prometheus.Gauge {
	b := Read()
	revision := b.Revision
	if revision == "" {
		revision = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name,
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": revision, "goversion": b.GoVersion},
		Help:        "Always 1; the labels say the version, VCS revision and Go version of the binary."})
	g.Set(1)
	return g
}
