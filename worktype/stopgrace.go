package worktype

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// StopGraceExtension is the registration's x_custom_fields key that holds each
// work type's stop grace (Spec.StopGraceMS) in milliseconds, as
// {"run_playbook": 30000}. It rides beside the catalogue rather than in its
// specs, so that an orchestrator of the previous release, which reads specs
// strictly and knows no stop grace, still accepts the registration.
const StopGraceExtension = "work_type_stop_grace_ms"

// putStopGraces lists c's non-zero stop graces in x under StopGraceExtension.
func putStopGraces(x map[string]any, c Catalog) {
	graces := map[string]int64{}
	for name, s := range c {
		if s.StopGraceMS != 0 {
			graces[name] = s.StopGraceMS
		}
	}
	if len(graces) > 0 {
		x[StopGraceExtension] = graces
	}
}

// readStopGraces sets the stop grace of each work type of c that
// StopGraceExtension names in x. Every name must be in c, every value an
// integer from 0 to MaxStopGrace in milliseconds; an error names the field.
func readStopGraces(x map[string]any, c map[string]Declared) error {
	raw, ok := x[StopGraceExtension]
	if !ok {
		return nil
	}
	field := "x_custom_fields." + StopGraceExtension
	b, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("%s: %v", field, err)
	}
	var graces map[string]json.Number
	if err := json.Unmarshal(b, &graces); err != nil || graces == nil {
		return fmt.Errorf("%s: must be an object of work types and milliseconds", field)
	}
	for _, name := range slices.Sorted(maps.Keys(graces)) {
		d, ok := c[name]
		if !ok {
			return fmt.Errorf("%s.%s: not in the registration's catalogue", field, name)
		}
		ms, err := graces[name].Int64()
		if err != nil || ms < 0 || ms > MaxStopGrace.Milliseconds() {
			return fmt.Errorf("%s.%s: must be an integer from 0 to %d", field, name, MaxStopGrace.Milliseconds())
		}
		d.StopGraceMS = ms
		c[name] = d
	}
	return nil
}
