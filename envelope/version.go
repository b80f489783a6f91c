package envelope

import (
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// Negotiate picks the lowest protocol version both sides speak, as the specification
// asks. With no version in common it returns a 5006 naming the versions ours speaks.
func Negotiate(ours, theirs []string) (string, error) {
	best := ""
	for _, v := range theirs {
		if !containsVersion(ours, v) {
			continue
		}
		if best == "" || compareVersions(v, best) < 0 {
			best = v
		}
	}
	if best == "" {
		return "", errcodes.NewUnsupportedVersion(strings.Join(theirs, ","), ours)
	}
	return best, nil
}

func containsVersion(list []string, v string) bool {
	for _, w := range list {
		if compareVersions(w, v) == 0 {
			return true
		}
	}
	return false
}

// compareVersions orders MAJOR.MINOR versions numerically; malformed ones sort last.
func compareVersions(a, b string) int {
	am, an, aok := splitVersion(a)
	bm, bn, bok := splitVersion(b)
	switch {
	case !aok || !bok:
		return strings.Compare(a, b)
	case am != bm:
		return am - bm
	default:
		return an - bn
	}
}

func splitVersion(v string) (major, minor int, ok bool) {
	if !validVersionSyntax(v) {
		return 0, 0, false
	}
	maj, min, _ := strings.Cut(v, ".")
	major, err1 := strconv.Atoi(maj)
	minor, err2 := strconv.Atoi(min)
	return major, minor, err1 == nil && err2 == nil
}
