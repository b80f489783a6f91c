package main

import (
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

func TestTaskExitCodes(t *testing.T) {
	tests := []struct {
		task task.Task
		want int
	}{
		{task.Task{State: task.StateSucceeded}, 0},
		{task.Task{State: task.StateFailed, Result: &task.Result{ExitCode: 3}}, 3},
		{task.Task{State: task.StateFailed, Result: &task.Result{ExitCode: 300}}, 1},
		{task.Task{State: task.StateCancelled}, exitTaskCancelled},
		{task.Task{State: task.StateError}, exitTaskError},
		{task.Task{State: task.StateRunning}, exitNotFinished},
	}
	for _, tt := range tests {
		if got := taskExitCode(&tt.task); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.task.State, got, tt.want)
		}
	}
}
