package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/broker"
)

// localTokens are the tokens of a single-host Chiffon, kept in <data>/tokens.
type localTokens struct {
	dir  string
	orch string
	api  string
}

// ensureTokens reads the tokens in <dataDir>/tokens, creating any that are missing
// with mode 0600.
func ensureTokens(dataDir string) (*localTokens, error) {
	t := &localTokens{dir: filepath.Join(dataDir, "tokens")}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, err
	}
	var err error
	if t.orch, err = loadOrCreateToken(filepath.Join(t.dir, "orchestrator.token")); err != nil {
		return nil, err
	}
	if t.api, err = loadOrCreateToken(filepath.Join(dataDir, apiTokenFile)); err != nil {
		return nil, err
	}
	return t, nil
}

// agent returns the token of one agent, creating it on first use.
func (t *localTokens) agent(id string) (string, error) {
	return loadOrCreateToken(filepath.Join(t.dir, id+".token"))
}

func loadOrCreateToken(path string) (string, error) {
	tok, err := broker.ReadTokenFile(path)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	tok = broker.NewToken()
	return tok, broker.WriteTokenFile(path, tok)
}
