package memstore_test

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/task/storetest"
)

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(_ *testing.T, retention time.Duration) task.Store { return memstore.New(retention) })
}
