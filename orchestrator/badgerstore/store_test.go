package badgerstore_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/badgerstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/task/storetest"
)

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, retention time.Duration) task.Store {
		s, err := badgerstore.Open(t.TempDir(), badgerstore.Options{Retention: retention,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
