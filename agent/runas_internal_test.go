package agent

import (
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestRunAsNeedsRootToSwitchUser(t *testing.T) {
	builder := &runAsUser{spec: "builder", cred: syscall.Credential{Uid: 1500, Gid: 1500, Groups: []uint32{1500, 27}}}
	for _, tc := range []struct {
		name    string
		runAs   *runAsUser
		euid    int
		want    *syscall.Credential
		wantErr string
	}{
		{"no run_as", nil, 1000, nil, ""},
		{"root switches", builder, 0, &builder.cred, ""},
		{"already that user", builder, 1500, nil, ""},
		{"other user, not root", builder, 1000, nil, "run_as builder (uid 1500) needs the agent to run as root; it runs as uid 1000"},
	} {
		got, err := tc.runAs.credential(tc.euid)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
				t.Errorf("%s: got %v, %v; want error %q", tc.name, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestRunAsLooksUpNameOrUid(t *testing.T) {
	for _, spec := range []string{"root", "0"} {
		r, err := lookupRunAs(spec)
		if err != nil {
			t.Skipf("no root user in the user database: %v", err)
		}
		if r.cred.Uid != 0 || r.cred.Gid != 0 {
			t.Errorf("run_as %s: %+v, want uid 0 gid 0", spec, r.cred)
		}
	}
	if _, err := lookupRunAs("no-such-user-chiffon"); err == nil || !strings.HasPrefix(err.Error(), "run_as: ") {
		t.Errorf("unknown user: %v, want an error naming run_as", err)
	}
}
