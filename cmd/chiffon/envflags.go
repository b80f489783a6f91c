package main

import (
	"os"

	"github.com/spf13/pflag"
)

// applyEnv sets each flag not given on the command line from its environment variable,
// so that flags override the environment, which overrides the config file.
func applyEnv(fl *pflag.FlagSet, env map[string]string) {
	for name, key := range env {
		if v, ok := os.LookupEnv(key); ok && v != "" && !fl.Changed(name) {
			_ = fl.Set(name, v)
			fl.Lookup(name).Changed = true
		}
	}
}
