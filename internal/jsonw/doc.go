// Package jsonw holds JSON writing helpers shared by the envelope encoder and the
// stores. Each writes exactly the bytes encoding/json writes with HTML escaping off,
// so that a hand-written encoder built on them can replace encoding/json without
// changing a single stored or sent byte; the tests compare the two.
package jsonw
