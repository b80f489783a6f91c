package main

import (
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles starts the profiles and the trace f asks for; stop writes and
// closes them. There is no block profile: the embedded nats-server sets the
// process's block profile rate when it starts (to its own option, 0), so the
// trace (go tool trace -pprof=sync) is where blocking shows.
func startProfiles(f benchFlags) (stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	start := func(path string, begin func(io.Writer) error, end func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := begin(file); err != nil {
			file.Close()
			return err
		}
		stops = append(stops, func() error { return errors.Join(end(file), file.Close()) })
		return nil
	}
	named := func(name string, enable func()) (func(io.Writer) error, func(io.Writer) error) {
		return func(io.Writer) error { enable(); return nil },
			func(file io.Writer) error { return pprof.Lookup(name).WriteTo(file, 0) }
	}
	mutexBegin, mutexEnd := named("mutex", func() { runtime.SetMutexProfileFraction(5) })
	steps := []struct {
		path       string
		begin, end func(io.Writer) error
	}{
		{f.cpuProfile, pprof.StartCPUProfile, func(io.Writer) error { pprof.StopCPUProfile(); return nil }},
		{f.trace, trace.Start, func(io.Writer) error { trace.Stop(); return nil }},
		{f.mutexProfile, mutexBegin, mutexEnd},
	}
	for _, s := range steps {
		if err := start(s.path, s.begin, s.end); err != nil {
			return nil, errors.Join(err, stop())
		}
	}
	return stop, nil
}
