package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"
)

// OperatorFile is the operator block of a broker's config file: the server trusts
// one operator and learns its accounts and their revocations from JWTs, which an
// orchestrator may push while it runs ($SYS.REQ.ACCOUNT.<account>.CLAIMS.UPDATE),
// so that identities are added and revoked without a restart. Package
// broker/natsjwt makes its keys and JWTs.
type OperatorFile struct {
	// OperatorJWT is the operator's JWT, naming its signing keys and its system
	// account.
	OperatorJWT string
	// SystemAccount is the system account's public key ("A...").
	SystemAccount string
	// ResolverDir is where the server keeps the account JWTs it was given (the
	// "full" resolver): pushed updates and revocations outlive a restart there.
	// Each node of a cluster needs its own. Give an absolute path.
	ResolverDir string
	// Preload are account JWTs by account public key, the system account's
	// among them, that the server stores at its start unless it holds a newer
	// one of the account in ResolverDir.
	Preload map[string]string
}

// check refuses an operator block the server would reject.
func (o *OperatorFile) check() error {
	var errs []error
	if strings.Count(o.OperatorJWT, ".") != 2 || strings.ContainsAny(o.OperatorJWT, " \"\r\n\t") {
		errs = append(errs, errors.New("operator: the operator JWT is not a JWT"))
	}
	if !nkeys.IsValidPublicAccountKey(o.SystemAccount) {
		errs = append(errs, fmt.Errorf("operator: system account %q is not a public account key", o.SystemAccount))
	}
	if o.ResolverDir == "" {
		errs = append(errs, errors.New("operator: the resolver needs a dir"))
	}
	if _, ok := o.Preload[o.SystemAccount]; !ok {
		errs = append(errs, errors.New("operator: the system account's JWT must be preloaded"))
	}
	for acc, jwt := range o.Preload {
		if !nkeys.IsValidPublicAccountKey(acc) || strings.Count(jwt, ".") != 2 || strings.ContainsAny(jwt, " \"\r\n\t") {
			errs = append(errs, fmt.Errorf("operator: preload of %q: not an account key and JWT", acc))
		}
	}
	return errors.Join(errs...)
}

// render writes the operator block in nats-server's config syntax.
func (o *OperatorFile) render(b *strings.Builder) {
	b.WriteString("\n# Operator mode: accounts and users come from JWTs signed by the site's operator;\n")
	b.WriteString("# an orchestrator pushes account updates (revocations) to the resolver, no restart needed.\n")
	fmt.Fprintf(b, "operator: %s\nsystem_account: %s\n", quote(o.OperatorJWT), quote(o.SystemAccount))
	fmt.Fprintf(b, "resolver {\n  type: full\n  dir: %s\n  allow_delete: false\n}\n", quote(o.ResolverDir))
	b.WriteString("resolver_preload {\n")
	for _, acc := range slices.Sorted(maps.Keys(o.Preload)) {
		fmt.Fprintf(b, "  %s: %s\n", acc, quote(o.Preload[acc]))
	}
	b.WriteString("}\n")
}
