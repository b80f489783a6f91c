package site

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DataDirOperatorFormat is the format of a `chiffon up` data dir made in NATS
// operator mode (up --operator): DataDirFormat's files, each identity a .creds
// (Spec.Operator). Its number is above DataDirFormat's so that a build which
// knows only data dirs of NKey users refuses it ("written by a newer
// chiffon") rather than run its broker with NKey users.
const DataDirOperatorFormat = 3

// DataDirMode is what an existing `chiffon up` data dir was made as.
type DataDirMode struct {
	// Made says the dir holds a site: a format file, secrets/ or a first
	// release's tokens/. A dir that holds none takes the mode asked for.
	Made bool
	// Operator says it was made in operator mode.
	Operator bool
}

// ReadDataDirMode says whether dir holds an up data dir, and in which mode it
// was made: operator mode only when its format is DataDirOperatorFormat. It
// refuses a format it cannot read, as UpgradeDataDir does.
func ReadDataDirMode(dir string) (DataDirMode, error) {
	n, err := readDataDirFormat(dir)
	if err != nil {
		return DataDirMode{}, err
	}
	if n > 0 {
		return DataDirMode{Made: true, Operator: n == DataDirOperatorFormat}, nil
	}
	for _, sub := range []string{"secrets", LegacyTokensDir} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err == nil {
			return DataDirMode{Made: true}, nil
		}
	}
	return DataDirMode{}, nil
}

// MarkDataDirOperator records that the new data dir dir (0700, made if
// missing) is made in operator mode. It refuses a dir that holds a site.
func MarkDataDirOperator(dir string) error {
	mode, err := ReadDataDirMode(dir)
	if err != nil {
		return err
	}
	if mode.Made {
		return fmt.Errorf("data dir %s already holds a site: its mode stays the one it was made in", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return writeDataDirFormat(dir, DataDirOperatorFormat)
}

// readDataDirFormat is the format in dir's format file, 0 when it has none.
// It refuses a file that holds no number, and a format newer than this
// build's.
func readDataDirFormat(dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, dataDirFormatFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("data dir %s: its format file holds %q, not a number", dir, data)
	}
	if n > DataDirOperatorFormat {
		return 0, fmt.Errorf("data dir %s was written by a newer chiffon (format %d; this build reads up to %d): run that release or a later one",
			dir, n, DataDirOperatorFormat)
	}
	return n, nil
}

// writeDataDirFormat records format n in dir's format file.
func writeDataDirFormat(dir string, n int) error {
	return os.WriteFile(filepath.Join(dir, dataDirFormatFile), []byte(strconv.Itoa(n)+"\n"), 0o644)
}

// SettleDataDirMode settles the NATS mode chiffon up runs dataDir's site in:
// a new data dir takes --operator (operator) and records it; an existing one
// keeps the mode it was made in, --operator left out or not. A data dir is
// never converted: --operator given (given) against a dir of NKey users, or
// --operator=false against an operator-mode one, is refused, saying which
// mode the dir is in.
func SettleDataDirMode(dataDir string, operator, given bool) (bool, error) {
	mode, err := ReadDataDirMode(dataDir)
	if err != nil {
		return false, err
	}
	if !mode.Made {
		if operator {
			return true, MarkDataDirOperator(dataDir)
		}
		return false, nil
	}
	switch {
	case given && operator && !mode.Operator:
		return false, fmt.Errorf("data dir %s was made with NKey users, not in NATS operator mode, and up never converts a data dir: "+
			"run up without --operator here, or with --operator and a new --data-dir", dataDir)
	case given && !operator && mode.Operator:
		return false, fmt.Errorf("data dir %s was made in NATS operator mode (up --operator), and up never converts a data dir: "+
			"run up without --operator=false here, or give a new --data-dir", dataDir)
	}
	return mode.Operator, nil
}
