package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestFollowHelpListsEveryExitCode(t *testing.T) {
	for _, cmd := range []string{"submit", "watch"} {
		code, out, _ := runCLI(t, "", cmd, "--help")
		for _, exit := range []int{0, 2, exitParamError, exitTaskError, exitNotFinished, exitTaskCancelled} {
			if code != 0 || !strings.Contains(out, fmt.Sprintf(" %d ", exit)) {
				t.Errorf("%s --help lacks exit code %d:\n%s", cmd, exit, out)
			}
		}
	}
}
