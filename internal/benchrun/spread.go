package benchrun

import "slices"

// Spread is how evenly tasks went to agents: the fewest, the median and the most
// tasks any one agent ran.
type Spread struct {
	Min    int64   `json:"min"`
	Median float64 `json:"median"`
	Max    int64   `json:"max"`
}

// spreadOf is the Spread of counts, each agent's tasks; the median of an even
// number of agents is the mean of the two middle ones.
func spreadOf(counts []int64) Spread {
	if len(counts) == 0 {
		return Spread{}
	}
	s := slices.Clone(counts)
	slices.Sort(s)
	n := len(s)
	med := float64(s[n/2])
	if n%2 == 0 {
		med = float64(s[n/2-1]+s[n/2]) / 2
	}
	return Spread{Min: s[0], Median: med, Max: s[n-1]}
}
