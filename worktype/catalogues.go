package worktype

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// MaxCatalogues bounds the catalogues a Catalogues keeps.
const MaxCatalogues = 256

// Catalogues reads registrations' catalogues as FromRegistration does, each
// distinct one once: a registration whose catalogue, stop graces and work
// types are those of one read before gets what that one got, with no schema
// compiled again. Thousands of agents of one kind register with the same
// catalogue, and all of them again after a broker restarts. It keeps at most
// MaxCatalogues (then it forgets one to keep another), and only those that
// were read without error. The zero value is ready; it is safe for concurrent
// use.
type Catalogues struct {
	mu   sync.Mutex
	read map[[sha256.Size]byte]map[string]Declared
}

// FromRegistration is FromRegistration(x, offered). The map returned may be
// shared with other registrations: never change it.
func (c *Catalogues) FromRegistration(x map[string]any, offered []string) (map[string]Declared, error) {
	if _, ok := x[Extension]; !ok {
		return nil, nil
	}
	key, ok := catalogueKey(x, offered)
	if ok {
		c.mu.Lock()
		d, hit := c.read[key]
		c.mu.Unlock()
		if hit {
			return d, nil
		}
	}
	d, err := FromRegistration(x, offered)
	if err != nil || !ok {
		return d, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil {
		c.read = map[[sha256.Size]byte]map[string]Declared{}
	}
	if len(c.read) >= MaxCatalogues {
		for k := range c.read {
			delete(c.read, k)
			break
		}
	}
	c.read[key] = d
	return d, nil
}

// catalogueKey is what FromRegistration reads of x and offered, hashed: the
// catalogue, the stop graces and the work types as JSON (keys sorted).
// ok is false when they do not encode, for FromRegistration to say why.
func catalogueKey(x map[string]any, offered []string) (key [sha256.Size]byte, ok bool) {
	b, err := json.Marshal([]any{x[Extension], x[StopGraceExtension], offered})
	if err != nil {
		return key, false
	}
	return sha256.Sum256(b), true
}
