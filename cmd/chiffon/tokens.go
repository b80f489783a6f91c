package main

import (
	"errors"
	"os"

	"github.com/chiffon-dev/chiffon/broker"
)

// loadOrCreateToken reads the token in path, or writes a new one there (0600).
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
