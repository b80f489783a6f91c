package agent

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// runAsUser is a work type's run_as user, looked up when the config is validated.
type runAsUser struct {
	spec string // as written in the config
	cred syscall.Credential
}

// lookupRunAs looks up a user name or numeric uid with its gid and supplementary
// groups; "" gives nil (the agent's user).
func lookupRunAs(spec string) (*runAsUser, error) {
	if spec == "" {
		return nil, nil
	}
	var u *user.User
	var err error
	if _, numErr := strconv.ParseUint(spec, 10, 32); numErr == nil {
		u, err = user.LookupId(spec)
	} else {
		u, err = user.Lookup(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("run_as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("run_as: %s: uid %q is not numeric", spec, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("run_as: %s: gid %q is not numeric", spec, u.Gid)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("run_as: groups of %s: %w", spec, err)
	}
	r := &runAsUser{spec: spec, cred: syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("run_as: %s: group id %q is not numeric", spec, id)
		}
		r.cred.Groups = append(r.cred.Groups, uint32(g))
	}
	return r, nil
}

// credential is what the child runs with, given the agent's effective uid: nil
// for the agent's own user. Only root may switch to another user; an agent that
// is not root gets an error rather than running the child as itself.
func (r *runAsUser) credential(euid int) (*syscall.Credential, error) {
	switch {
	case r == nil:
		return nil, nil
	case euid == 0:
		c := r.cred
		c.Groups = append([]uint32(nil), r.cred.Groups...)
		return &c, nil
	case int(r.cred.Uid) == euid:
		return nil, nil // already that user; setgroups would need root
	}
	return nil, fmt.Errorf("run_as %s (uid %d) needs the agent to run as root; it runs as uid %d",
		r.spec, r.cred.Uid, euid)
}
